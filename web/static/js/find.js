// Find in a session: the words are searched in the model (every prompt,
// reply, thought, note, and tool call's input and result, rendered or
// not), and going to a match renders the turn that holds it, opens the
// card or group it is in, highlights the matches there and scrolls to the
// current one.

import { h, icon } from './dom.js';
import { toolName } from './view.js';

// MAX_MATCHES is the most matches counted and visited in one search.
export const MAX_MATCHES = 1000;
// MAX_MARKS is the most matches highlighted on the page at once (those of
// the current match's element first).
export const MAX_MARKS = 300;
// MAX_FIND is the most characters of a search kept.
export const MAX_FIND = 200;

// strings collects the string values of v (a tool's input), depth first.
function strings(v, out, depth = 0) {
  if (typeof v === 'string') out.push(v);
  else if (v && typeof v === 'object' && depth < 8) for (const x of Object.values(v)) strings(x, out, depth + 1);
  return out;
}

// textOf is the searchable text of one item of a turn or subagent.
function textOf(it) {
  switch (it.kind) {
    case 'text': case 'thinking': case 'service':
      return it.text || '';
    case 'prompt':
      return it.env?.ev?.text || '';
    case 'file':
      return it.env?.ev?.name || '';
    case 'tool':
      return [toolName(it.name), it.title || '', ...strings(it.args, []), typeof it.result === 'string' ? it.result : ''].join('\n');
    case 'sub':
      return it.title || '';
    default:
      return '';
  }
}

// units lists what can be searched, in the order of the page: {block,
// item (null for a prompt), text}.
function units(model) {
  const out = [];
  const items = (block, list) => {
    for (const it of list) {
      out.push({ block, item: it, text: textOf(it) });
      if (it.kind === 'sub') items(block, it.items);
    }
  };
  for (const b of model.blocks) {
    if (b.kind === 'user') {
      const ev = b.env?.ev || {};
      out.push({ block: b, item: null, text: ev.t === 'file' ? ev.name || '' : ev.text || '' });
    } else if (b.kind === 'turn') {
      items(b, b.items);
    }
  }
  return out;
}

/**
 * findMatches returns the matches of q (any case) in the model, in page
 * order: [{block, item, nth}] where nth counts the matches before it in the
 * same unit; at most MAX_MATCHES.
 */
export function findMatches(model, q) {
  const needle = String(q || '').toLowerCase();
  const out = [];
  if (!needle) return out;
  for (const u of units(model)) {
    const hay = u.text.toLowerCase();
    let nth = 0;
    for (let i = hay.indexOf(needle); i >= 0; i = hay.indexOf(needle, i + needle.length)) {
      out.push({ block: u.block, item: u.item, nth: nth++ });
      if (out.length >= MAX_MATCHES) return out;
    }
  }
  return out;
}

// clearMarks takes the highlights out of root.
function clearMarks(root) {
  for (const m of root.querySelectorAll('mark.find-hit')) {
    const parent = m.parentNode;
    m.replaceWith(document.createTextNode(m.textContent));
    parent.normalize();
  }
}

// mark highlights the matches of needle (lower case) in the text under
// root, skipping skip's subtree, up to budget marks; it returns them.
function mark(root, needle, budget, skip = null) {
  const found = [];
  if (!root || budget <= 0) return found;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode: (n) => (skip && skip.contains(n)) || n.parentElement?.closest('.copy-btn, .sr-only, button') ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
  });
  const nodes = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) nodes.push(n);
  for (let n of nodes) {
    let i = n.data.toLowerCase().indexOf(needle);
    while (i >= 0 && found.length < budget) {
      const hit = n.splitText(i);
      n = hit.splitText(needle.length);
      const m = h('mark', { class: 'find-hit' });
      hit.replaceWith(m);
      m.append(hit);
      found.push(m);
      i = n.data.toLowerCase().indexOf(needle);
    }
    if (found.length >= budget) break;
  }
  return found;
}

/**
 * findBar is the session page's find bar. get() returns {model, view,
 * root} (root: the element holding the conversation). open() shows it.
 */
export function findBar(get) {
  const input = h('input', { type: 'search', class: 'find-input', placeholder: 'Find in this session', 'aria-label': 'Find in session', maxlength: MAX_FIND, autocomplete: 'off', enterkeyhint: 'search' });
  const count = h('span', { class: 'find-count', 'aria-live': 'polite' });
  const prev = h('button', { class: 'icon-btn', type: 'button', 'aria-label': 'Previous match', onclick: () => go(-1) }, icon('up'));
  const next = h('button', { class: 'icon-btn', type: 'button', 'aria-label': 'Next match', onclick: () => go(1) }, icon('down'));
  const close = h('button', { class: 'icon-btn', type: 'button', 'aria-label': 'Close find', onclick: () => hide() }, icon('cross'));
  const el = h('form', { class: 'find-bar', role: 'search', 'aria-label': 'Find in this session', hidden: true, onsubmit: (e) => e.preventDefault() },
    input, count, prev, next, close);
  let matches = [];
  let at = -1;
  let key = null; // what the matches were found in: [model, envelopes, query]

  input.addEventListener('input', () => { key = null; at = -1; search(); show(); });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') { e.preventDefault(); go(e.shiftKey ? 1 : -1); }
    else if (e.key === 'Escape') { e.preventDefault(); hide(); }
  });

  // search finds the matches again when the query or the model changed,
  // keeping the current match where it still is.
  function search() {
    const { model } = get();
    const q = input.value.slice(0, MAX_FIND);
    if (key && key[0] === model && key[1] === model.envelopes && key[2] === q) return;
    const cur = matches[at];
    key = [model, model.envelopes, q];
    matches = findMatches(model, q);
    const same = cur ? matches.findIndex((m) => m.item === cur.item && m.block === cur.block && m.nth === cur.nth) : -1;
    // A new search starts from the newest match: the reader is at the end.
    at = same >= 0 ? same : matches.length - 1;
  }

  function go(step) {
    search();
    if (matches.length) at = (at + step + matches.length) % matches.length;
    show();
  }

  // show draws the count and the highlights, and scrolls to the current match.
  function show() {
    const { view, root } = get();
    clearMarks(root);
    const q = input.value.slice(0, MAX_FIND).toLowerCase();
    const full = matches.length >= MAX_MATCHES ? MAX_MATCHES + '+' : String(matches.length);
    count.textContent = !q ? '' : matches.length ? `${at + 1} of ${full}` : 'No matches';
    el.dataset.matches = String(matches.length);
    prev.disabled = next.disabled = matches.length === 0;
    if (!q || !matches.length || !view) return;
    const m = matches[at];
    const target = view.reveal(m.block, m.item) || root;
    const own = mark(target, q, MAX_MARKS);
    mark(root, q, MAX_MARKS - own.length, target);
    const cur = own[Math.min(m.nth, own.length - 1)];
    if (cur) cur.classList.add('current');
    (cur || target).scrollIntoView({ block: 'center' });
  }

  function hide() {
    el.hidden = true;
    clearMarks(get().root);
    input.value = '';
    matches = [];
    at = -1;
    key = null;
  }

  return {
    el,
    open() {
      el.hidden = false;
      input.focus();
      input.select();
    },
    hide,
  };
}
