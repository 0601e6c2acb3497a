// The conversation view: renders a SessionModel into the page and patches
// it as envelopes arrive. Long sessions render incrementally: the newest
// blocks first, earlier ones as the reader scrolls up; bodies of tool cards,
// thinking and subagent groups are built when first opened.

import { fill, h, icon } from './dom.js';
import { renderMarkdown } from './markdown.js';
import { toolBody, toolPreview, toolTitle } from './tools.js';
import { parseMarkup, renderChips } from './markup.js';
import { duration, oneLine, tokens } from './format.js';
import { copyButton } from './copy.js';

const CHUNK = 60; // rows rendered at a time

/** IMAGE_TYPES are the images a prompt may show (the relay keeps no other type). */
const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'];
/** MAX_BLOB_BYTES is protocol.MaxBlobBytes: larger images are not kept. */
const MAX_BLOB_BYTES = 4 << 20;

/** costText says a cost in US dollars as Claude Code does: cents, or four decimals below a cent. */
export function costText(usd) {
  return '$' + (usd > 0 && usd < 0.01 ? usd.toFixed(4) : usd.toFixed(2));
}

function sizeText(n) {
  if (!(n >= 0)) return '?';
  return n >= 1 << 20 ? (n / (1 << 20)).toFixed(1) + ' MB' : Math.max(1, Math.round(n / 1024)) + ' KB';
}

/** decodeText turns base64 of UTF-8 into text. */
function decodeText(b64) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return new TextDecoder().decode(bytes);
}

export class ConversationView {
  constructor(model, root, opts = {}) {
    this.model = model;
    this.root = root;
    this.opts = opts;
    this.dom = new WeakMap(); // model object -> {el, body, ...}
    this.from = model.blocks.length; // blocks[from:] are in the page
    this.more = h('button', { class: 'earlier', type: 'button', text: 'Show earlier messages', onclick: () => this.renderEarlier() });
    this.list = h('div', { class: 'blocks' });
    this.liveEl = h('div', { class: 'live-tail' });
    this.live = new Map(); // message:index -> {el, text, thinking, subagent}
    root.replaceChildren(this.more, this.list, this.liveEl);
    this.observer = new IntersectionObserver((es) => {
      if (es.some((e) => e.isIntersecting) && this.from > 0) this.renderEarlier();
    }, { rootMargin: '600px 0px 0px 0px' });
    this.observer.observe(this.more);
    this.renderEarlier(true, opts.minBlocks || 0);
  }

  destroy() { this.observer.disconnect(); }

  /** renderEarlier puts the next CHUNK rows above what is shown. */
  renderEarlier(initial = false, minBlocks = 0) {
    const blocks = this.model.blocks;
    if (this.from <= 0) {
      // The start of the session may not be loaded yet (a long session
      // shows its tail first).
      this.more.hidden = !(this.model.first > 0);
      if (!this.more.hidden) { this.more.textContent = 'Loading earlier messages…'; this.opts.loadEarlier?.(); }
      return;
    }
    let start = this.from;
    let w = 0;
    while (start > 0 && (w < CHUNK || blocks.length - start < minBlocks)) w += weight(blocks[--start]);
    const frag = document.createDocumentFragment();
    for (let i = start; i < this.from; i++) frag.append(this.block(blocks[i]));
    const scroller = document.scrollingElement;
    const before = scroller.scrollHeight;
    const top = scroller.scrollTop;
    this.list.prepend(frag);
    this.from = start;
    this.more.hidden = start === 0 && !(this.model.first > 0);
    if (!initial) scroller.scrollTop = top + (scroller.scrollHeight - before);
  }

  /** apply patches the page with the changes of SessionModel.apply. */
  apply(changes) {
    for (const c of changes) {
      if (c.op === 'block') {
        // New blocks are the newest. A turn left open before a new one
        // began will not go on: redraw it as unfinished.
        const prev = this.model.blocks[this.model.blocks.lastIndexOf(c.block) - 1];
        this.list.append(this.block(c.block));
        if (prev && prev.kind === 'turn' && !prev.status) this.updateTurn(prev);
      } else if (c.op === 'item') {
        // Items rendered with their block (changes come a batch at a time)
        // are not added twice.
        const d = this.dom.get(c.parent);
        if (d && d.body && !this.dom.has(c.item)) d.body.append(this.item(c.item));
        if (c.parent.kind === 'sub') this.updateSub(c.parent, c.item);
        if (c.item.kind === 'text' || c.item.kind === 'thinking') this.settleLive(c.item);
      } else if (c.op === 'update') {
        const t = c.target;
        if (t.kind === 'tool') this.updateTool(t);
        else if (t.kind === 'sub') this.updateSub(t);
        else if (t.kind === 'turn') { this.updateTurn(t); if (t.status) this.clearLive(); }
      }
    }
  }

  // --- blocks -------------------------------------------------------------

  block(b) {
    if (b.kind === 'user') {
      const ev = b.env.ev;
      const bubble = ev.t === 'file'
        ? this.image(ev, b.env.id)
        : h('div', { class: 'bubble', text: ev.text });
      if (ev.t === 'text' && ((ev.text || '').length > 700 || (ev.text || '').split('\n').length > 12)) {
        bubble.classList.add('clamped');
        bubble.append(h('button', { class: 'more', type: 'button', text: 'Show more', onclick: (e) => { e.currentTarget.remove(); bubble.classList.remove('clamped'); } }));
      }
      // Claude Code's markup (slash commands, selections, reminders) as chips.
      const mk = ev.t === 'text' ? parseMarkup(ev.text) : null;
      if (mk?.chips.length) {
        const el = h('div', { class: 'msg user markup', 'data-id': b.id }, renderChips(mk.chips), mk.rest ? h('div', { class: 'bubble', text: mk.rest }) : null);
        this.dom.set(b, { el });
        return el;
      }
      const el = h('div', { class: 'msg user', 'data-id': b.id }, bubble,
        ev.t === 'text' && ev.text ? h('div', { class: 'msg-actions' }, copyButton('Copy prompt', ev.text)) : null);
      this.dom.set(b, { el });
      return el;
    }
    const body = h('div', { class: 'turn-body' });
    const end = h('div', { class: 'turn-end' });
    const el = h('section', { class: 'turn', 'data-turn': b.id }, body, end);
    this.dom.set(b, { el, body, end });
    for (const it of b.items) body.append(this.item(it));
    this.updateTurn(b);
    return el;
  }

  updateTurn(t) {
    const d = this.dom.get(t);
    if (!d) return;
    // An open turn of a session nobody runs now (a recording) is unfinished,
    // not working.
    const st = t.status || (this.opts.live?.() === false || t !== this.model.openTurn ? 'open' : 'running');
    d.el.dataset.status = st;
    // The last turn of a recording that simply stops is not unfinished work.
    const endOfRecording = st === 'open' && t === this.model.openTurn;
    const label = { completed: 'Completed', failed: 'Failed', cancelled: 'Cancelled', running: 'Working…', open: endOfRecording ? 'The recording ends here' : 'Unfinished' }[st] || st;
    const bits = [];
    // A turn lasts from the prompt that started it to its end.
    const from = this.promptTime(t) ?? t.start;
    if (t.status && t.end && from) bits.push(duration(t.end - from));
    if (t.tools) bits.push(t.tools + (t.tools === 1 ? ' tool' : ' tools'));
    const cost = t.status ? this.opts.turnCost?.(t.id) : undefined;
    if (cost !== undefined) bits.push(costText(cost));
    t.cost = cost;
    const reply = t.items.some((it) => it.kind === 'text' && it.text.trim());
    fill(d.end,
      reply ? copyButton('Copy reply', () => replyText(t)) : null,
      h('span', { class: 'badge ' + st }, st === 'running' ? h('span', { class: 'spinner' }) : icon(st === 'completed' ? 'check' : st === 'failed' ? 'cross' : st === 'open' ? (endOfRecording ? 'stop' : 'dots') : 'stop'), label),
      bits.length ? h('span', { class: 'meta', text: bits.join(' · ') }) : null,
    );
  }

  /** costsChanged draws again the footers of the turns whose cost came or changed. */
  costsChanged() {
    for (const t of this.model.turns.values()) {
      if (t.status && this.dom.has(t) && this.opts.turnCost?.(t.id) !== t.cost) this.updateTurn(t);
    }
  }

  /** promptTime is the time of the prompt just before turn t, if any. */
  promptTime(t) {
    if (!('promptTime' in t)) {
      const i = this.model.blocks.lastIndexOf(t);
      const prev = i > 0 ? this.model.blocks[i - 1] : null;
      t.promptTime = prev?.kind === 'user' && prev.time && (!t.start || prev.time <= t.start) ? prev.time : null;
    }
    return t.promptTime;
  }

  // --- items --------------------------------------------------------------

  item(it) {
    let el;
    switch (it.kind) {
      case 'text':
        el = h('div', { class: 'text md', 'data-id': it.env.id });
        el.append(renderMarkdown(it.text));
        break;
      case 'thinking':
        // Redacted thinking (a signature, no text) has nothing to show.
        if (!it.text.trim()) return document.createComment('thinking');
        el = this.lazyDetails('thinking', it, h('span', { class: 'label' }, icon('brain'), 'Thinking'),
          h('span', { class: 'preview', text: oneLine(it.text, 90) }), () => h('div', { class: 'md' }, renderMarkdown(it.text)));
        break;
      case 'service':
        el = h('div', { class: 'service', 'data-id': it.env.id, text: it.text });
        break;
      case 'prompt':
        el = h('div', { class: 'sub-prompt', 'data-id': it.env.id }, h('div', { class: 'label', text: 'Task' }), h('div', { class: 'md' }, renderMarkdown(it.env.ev.text || '')));
        break;
      case 'file':
        el = h('div', { class: 'service', 'data-id': it.env.id, text: 'File: ' + it.env.ev.name });
        break;
      case 'tool':
        el = this.tool(it);
        break;
      case 'sub':
        el = this.sub(it);
        break;
      default:
        el = h('div');
    }
    if (!this.dom.has(it)) this.dom.set(it, { el });
    return el;
  }

  lazyDetails(cls, it, label, preview, build) {
    const el = h('details', { class: cls, 'data-id': it.env.id });
    const sum = h('summary', null, label, preview);
    el.append(sum);
    const fillIn = () => { if (el.childElementCount === 1) el.append(build()); };
    el.addEventListener('toggle', () => { if (el.open) fillIn(); });
    this.dom.set(it, { el, open: () => { el.open = true; fillIn(); } });
    return el;
  }

  /**
   * reveal shows item it of block b (b itself when it is null): renders
   * the blocks from b on, opens the groups and cards that hold it and
   * builds their bodies now. It returns the item's element, or null.
   */
  reveal(b, it = null) {
    const i = this.model.blocks.lastIndexOf(b);
    if (i < 0) return null;
    while (this.from > i) {
      const was = this.from;
      this.renderEarlier();
      if (this.from === was) return null;
    }
    if (!it) return this.dom.get(b)?.el || null;
    const chain = [];
    for (let p = it.parent; p && p !== b; p = p.parent) chain.unshift(p);
    for (const p of [...chain, it]) this.dom.get(p)?.open?.();
    return this.dom.get(it)?.el || null;
  }

  tool(t) {
    const status = h('span', { class: 'status' });
    const title = h('span', { class: 'title' }, toolTitle(t, this.model));
    const preview = h('div', { class: 'result-preview' });
    const el = h('details', { class: 'tool', 'data-id': t.env.id, 'data-call': t.call, 'data-tool': t.name },
      h('summary', null, status, h('span', { class: 'name', text: toolName(t.name) }), title, icon('chevron', 'chev')),
      preview);
    const body = h('div', { class: 'tool-body' });
    const fillIn = () => { if (!body.isConnected) { this.fillTool(t, body); el.append(body); } };
    el.addEventListener('toggle', () => { if (el.open) fillIn(); });
    this.dom.set(t, { el, status, preview, body, open: () => { el.open = true; fillIn(); } });
    this.updateTool(t);
    return el;
  }

  updateTool(t) {
    const d = this.dom.get(t);
    if (!d) return;
    d.el.dataset.status = t.status;
    fill(d.status, t.status === 'running' ? h('span', { class: 'spinner' }) : icon(t.status === 'failed' ? 'cross' : 'check'));
    const r = toolPreview(t);
    d.preview.hidden = !r;
    d.preview.textContent = r;
    if (d.body.isConnected) this.fillTool(t, d.body);
  }

  fillTool(t, body) {
    body.replaceChildren(...toolBody(t, this.model, this.opts.fetchBlob ? { showAll: (x) => this.showAll(x) } : null));
  }

  /** showAll fetches a tool's full result from the relay and draws the card again with it. */
  async showAll(t) {
    try {
      const text = decodeText(await this.opts.fetchBlob(t.endId));
      t.result = text;
      t.truncated = false;
      t.fullError = '';
    } catch (e) {
      t.fullError = String(e?.message || e);
    }
    this.updateTool(t);
  }

  /** image draws a prompt's image (a file envelope) once the relay sends its bytes. */
  image(ev, id) {
    const w = ev.image?.width > 0 ? ev.image.width : 0;
    const hh = ev.image?.height > 0 ? ev.image.height : 0;
    const label = `${ev.name} (${sizeText(ev.size)}${w ? `, ${w}×${hh}` : ''})`;
    const fig = h('figure', { class: 'bubble image' }, h('figcaption', { class: 'meta', text: label }));
    if (!IMAGE_TYPES.includes(ev.mimeType) || !this.opts.fetchBlob) return fig;
    if (!(ev.size <= MAX_BLOB_BYTES)) { fig.append(h('div', { class: 'meta', text: 'Too large for the relay to keep.' })); return fig; }
    const img = h('img', { alt: 'Image attached to the prompt: ' + ev.name, decoding: 'async' });
    if (w) { img.width = w; img.height = hh; }
    fig.prepend(img);
    this.opts.fetchBlob(id).then((b64) => { img.src = `data:${ev.mimeType};base64,${b64}`; }, (e) => {
      img.remove();
      fig.append(h('div', { class: 'meta', text: 'Could not load the image: ' + String(e?.message || e) }));
    });
    return fig;
  }

  sub(s) {
    const status = h('span', { class: 'status' });
    const title = h('span', { class: 'title' });
    const meta = h('span', { class: 'meta' });
    const activity = h('div', { class: 'activity' });
    // Shown by the stylesheet for a running subagent of a remote session.
    const stop = h('button', { class: 'sub-stop', type: 'button', 'aria-label': 'Stop this subagent',
      onclick: (e) => { e.preventDefault(); stop.disabled = true; this.opts.stopSub?.(s.id, stop); } }, icon('stop'), ' Stop');
    const body = h('div', { class: 'sub-body' });
    // What Claude says the subagent does now (the app fills it in).
    const progress = h('div', { class: 'progress' });
    const el = h('details', { class: 'sub', 'data-sub': s.id },
      h('summary', null, h('span', { class: 'sub-icon' }, icon('agent')), h('span', { class: 'sub-head' }, title, meta), status, icon('chevron', 'chev')),
      activity, progress, stop);
    const d = { el, status, title, meta, activity, stop, body: null };
    const fillIn = () => {
      if (d.body) return;
      for (const it of s.items) body.append(this.item(it));
      d.body = body;
      el.append(body);
    };
    el.addEventListener('toggle', () => { if (el.open) fillIn(); });
    d.open = () => { el.open = true; fillIn(); };
    this.dom.set(s, d);
    this.updateSub(s);
    return el;
  }

  updateSub(s, added) {
    const d = this.dom.get(s);
    if (!d) return;
    d.el.dataset.status = s.done ? 'done' : 'running';
    d.title.textContent = s.title || 'Subagent';
    const bits = [s.done ? 'Done' : 'Running'];
    if (s.tools) bits.push(s.tools + (s.tools === 1 ? ' tool' : ' tools'));
    if (s.done && s.end && s.started) bits.push(duration(s.end - s.started));
    d.meta.textContent = bits.join(' · ');
    fill(d.status, s.done ? icon('check') : h('span', { class: 'spinner' }));
    const last = added || s.items[s.items.length - 1];
    if (last && !s.done) {
      d.activity.hidden = false;
      d.activity.textContent = last.kind === 'tool' ? toolName(last.name) + ' · ' + (last.title || '') : oneLine(last.text ?? last.env?.ev?.text ?? '', 100);
    } else {
      d.activity.hidden = true;
    }
  }

  // --- live deltas (remote mode) ------------------------------------------

  /** delta shows a piece of text being typed. */
  delta(p) {
    if (!p || p.type !== 'delta' || typeof p.text !== 'string') return;
    const key = (p.message || '') + ':' + (p.index ?? 0);
    let l = this.live.get(key);
    if (!l) {
      const label = p.thinking ? h('div', { class: 'label' }, icon('brain'), 'Thinking') : null;
      const sub = p.subagent ? this.model.subs.get(p.subagent) : null;
      const who = sub ? h('div', { class: 'label', text: sub.title || 'Subagent' }) : null;
      const md = h('div', { class: 'md' });
      l = { el: h('div', { class: 'text live' + (p.thinking ? ' thinking-live' : '') }, who, label, md), md, text: '', thinking: !!p.thinking, subagent: p.subagent || '', queued: false };
      this.live.set(key, l);
      this.liveEl.append(l.el);
    }
    l.text += p.text;
    if (!l.queued) {
      l.queued = true;
      requestAnimationFrame(() => {
        l.queued = false;
        l.md.replaceChildren(renderMarkdown(l.text));
        l.md.append(h('span', { class: 'caret' }));
        this.opts.onGrow?.();
      });
    }
  }

  // settleLive drops the typing block that a complete text replaces.
  settleLive(it) {
    const thinking = it.kind === 'thinking';
    const sub = it.parent?.kind === 'sub' ? it.parent.id : '';
    let match = null;
    for (const [k, l] of this.live) {
      if (l.thinking !== thinking || l.subagent !== sub) continue;
      if (!match) match = k;
      if (it.text.startsWith(l.text.trim().slice(0, 64))) { match = k; break; }
    }
    if (match) { this.live.get(match).el.remove(); this.live.delete(match); }
  }

  /** refreshOpenTurn redraws the open turn's footer (the session's state changed). */
  refreshOpenTurn() {
    const t = this.model.openTurn;
    if (t) this.updateTurn(t);
  }

  clearLive() {
    for (const l of this.live.values()) l.el.remove();
    this.live.clear();
  }
}

/** replyText is what the agent wrote in turn t (its texts, not thinking or tools), as Markdown. */
export function replyText(t) {
  return t.items.filter((it) => it.kind === 'text' && it.text.trim()).map((it) => it.text.trim()).join('\n\n');
}

function weight(b) {
  return b.kind === 'turn' ? 1 + b.items.length : 1;
}

export function toolName(name) {
  const m = /^mcp__(.+?)__(.+)$/.exec(name || '');
  return m ? m[2] + ' (' + m[1] + ')' : name || 'Tool';
}

/** contextMeter describes usage as context in use over the window. */
/** contextCount is the meter's reading from the agent's own count (who: its name). */
export function contextCount(c, who = 'Claude') {
  const used = Math.max(0, c.usedTokens), win = c.maxTokens;
  return { used, win, pct: Math.min(100, (used / win) * 100), label: tokens(used) + ' / ' + tokens(win) + ' (' + who + '\'s count)' };
}

export function contextUse(usage, fallbackWindow = 200000) {
  if (!usage) return null;
  const used = (usage.input_tokens || 0) + (usage.cache_creation_input_tokens || 0) + (usage.cache_read_input_tokens || 0);
  const win = usage.context_window > 0 ? usage.context_window : fallbackWindow;
  return { used, win, pct: Math.min(100, (used / win) * 100), label: tokens(used) + ' / ' + tokens(win) };
}
