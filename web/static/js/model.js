// The conversation rebuilt from envelopes (docs/protocol.md). A session is
// a list of blocks: a user prompt, or an agent turn holding its items (text,
// thinking, tool calls, notes, subagent groups holding their own items).
// apply() takes envelopes in sequence order, drops any seen before, and
// reports what changed so a view can patch itself.

export class SessionModel {
  constructor(id) {
    this.id = id;
    this.lastSeq = 0;
    this.seen = new Set(); // envelope ids
    this.blocks = [];
    this.turns = new Map(); // turn id -> turn block
    this.calls = new Map(); // tool call id -> tool item
    this.subs = new Map(); // subagent id -> group
    this.usage = null; // the latest usage seen
    this.envelopes = 0;
    this.batches = 0; // frames of envelopes received
    // first > 0: only envelopes after seq `first` are loaded (the tail of a
    // long session, shown first); log keeps what was applied, to rebuild
    // the model once the earlier part arrives.
    this.first = 0;
    this.log = [];
    this.prompts = []; // texts of user prompts, in order
  }

  /** openTurn is the last turn if it has not ended. */
  get openTurn() {
    for (let i = this.blocks.length - 1; i >= 0; i--) {
      const b = this.blocks[i];
      if (b.kind === 'turn') return b.status ? null : b;
    }
    return null;
  }

  /**
   * apply adds the envelope stored as seq. It returns the changes, or null
   * when the envelope was seen before. Changes: {op:'block', block},
   * {op:'item', parent, item}, {op:'update', target}.
   */
  apply(seq, env) {
    if (seq && seq <= this.lastSeq) return null;
    if (seq) this.lastSeq = seq;
    const bad = invalid(env);
    if (bad) throw new BadEnvelope(bad);
    if (this.seen.has(env.id)) return null;
    this.seen.add(env.id);
    this.envelopes++;
    if (this.first > 0) this.log.push([seq, env]); // a tail: kept for withEarlier
    const ch = [];
    const ev = env.ev;
    if (env.usage) this.usage = env.usage;
    if (env.role === 'user' && !env.turn) {
      if (env.subagent) {
        const sub = this.sub(env.subagent, this.lastTurn(env.time), ch);
        this.push(sub, { kind: 'prompt', env }, ch);
        return ch;
      }
      if (ev.t === 'text' || ev.t === 'file') {
        const block = { kind: 'user', id: env.id, env, time: env.time };
        this.blocks.push(block);
        if (ev.t === 'text') this.prompts.push(ev.text || '');
        ch.push({ op: 'block', block });
      }
      return ch;
    }
    const turn = this.turn(env.turn || this.openTurn?.id || 'orphan-' + env.id, env.time, ch);
    turn.last = Math.max(turn.last, env.time || 0);
    if (ev.t === 'turn-start') return ch;
    if (ev.t === 'turn-end') {
      turn.status = ev.status || 'completed';
      turn.end = env.time;
      ch.push({ op: 'update', target: turn });
      return ch;
    }
    const parent = env.subagent ? this.sub(env.subagent, turn, ch) : turn;
    switch (ev.t) {
      case 'start':
        if (ev.title) parent.title = ev.title;
        parent.started = env.time;
        ch.push({ op: 'update', target: parent });
        break;
      case 'stop':
        parent.done = true;
        parent.end = env.time;
        ch.push({ op: 'update', target: parent });
        break;
      case 'text':
        this.push(parent, { kind: ev.thinking ? 'thinking' : 'text', env, text: ev.text || '' }, ch);
        break;
      case 'service':
        this.push(parent, { kind: 'service', env, text: ev.text || '' }, ch);
        break;
      case 'file':
        this.push(parent, { kind: 'file', env }, ch);
        break;
      case 'tool-call-start': {
        const tool = { kind: 'tool', env, call: ev.call, name: ev.name, title: ev.title, args: ev.args, status: 'running', start: env.time };
        this.calls.set(ev.call, tool);
        turn.tools++;
        this.push(parent, tool, ch);
        break;
      }
      case 'tool-call-end': {
        let tool = this.calls.get(ev.call);
        if (!tool) {
          tool = { kind: 'tool', env, call: ev.call, name: 'Tool', title: 'Tool result', args: null, status: 'running' };
          this.calls.set(ev.call, tool);
          this.push(parent, tool, ch);
        }
        tool.status = ev.error ? 'failed' : 'done';
        tool.result = ev.result;
        tool.truncated = !!ev.truncated;
        // The relay keeps the full result (ev.full bytes) under this envelope's id.
        tool.full = Number.isSafeInteger(ev.full) && ev.full > 0 ? ev.full : 0;
        tool.endId = env.id;
        tool.end = env.time;
        // The change an edit made, with line numbers (a Codex patch's).
        tool.diff = isObj(ev.diff) ? ev.diff : null;
        ch.push({ op: 'update', target: tool });
        break;
      }
      default:
        break; // kinds of a later version: ignored
    }
    return ch;
  }

  /** withEarlier returns a model of the earlier envelopes followed by this one's. */
  withEarlier(earlier) {
    const m = new SessionModel(this.id);
    // Envelopes that cannot be shown were skipped (and said) the first time.
    const add = ([seq, env]) => { try { m.apply(seq, env); } catch { /* skipped */ } };
    earlier.forEach(add);
    this.log.forEach(add);
    return m;
  }

  turn(id, time, ch) {
    let t = this.turns.get(id);
    if (!t) {
      t = { kind: 'turn', id, items: [], status: null, start: time, last: time || 0, tools: 0 };
      this.turns.set(id, t);
      this.blocks.push(t);
      ch.push({ op: 'block', block: t });
    }
    return t;
  }

  lastTurn(time) {
    for (let i = this.blocks.length - 1; i >= 0; i--) if (this.blocks[i].kind === 'turn') return this.blocks[i];
    return this.turn('orphan-' + time, time, []);
  }

  sub(id, turn, ch) {
    let s = this.subs.get(id);
    if (!s) {
      s = { kind: 'sub', id, title: '', items: [], done: false, tools: 0, turn };
      this.subs.set(id, s);
      this.push(turn, s, ch);
    }
    return s;
  }

  push(parent, item, ch) {
    item.parent = parent;
    parent.items.push(item);
    if (item.kind === 'tool' && parent.kind === 'sub') parent.tools++;
    ch.push({ op: 'item', parent, item });
  }
}

/** BadEnvelope is an envelope the app cannot show (it is skipped). */
export class BadEnvelope extends Error {}

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const opt = (v, type) => v === undefined || v === null || typeof v === type;

// invalid says why env cannot be shown, or '' when it can: the fields the
// app reads must have their documented types (unknown fields are ignored).
function invalid(env) {
  if (!isObj(env)) return 'an envelope that is not an object';
  if (typeof env.id !== 'string' || !env.id) return 'an envelope without an id';
  const ev = env.ev;
  if (!isObj(ev) || typeof ev.t !== 'string') return 'an envelope without an event';
  if (!opt(env.time, 'number') || !opt(env.role, 'string') || !opt(env.turn, 'string') || !opt(env.subagent, 'string')) return 'an envelope with fields of the wrong type';
  if (env.usage != null && !isObj(env.usage)) return 'an envelope with fields of the wrong type';
  for (const k of ['text', 'call', 'name', 'title', 'status', 'result']) {
    if (!opt(ev[k], 'string')) return `a ${ev.t.slice(0, 40)} event whose ${k} is not text`;
  }
  if (ev.args != null && !isObj(ev.args)) return 'a tool call whose arguments are not an object';
  if ((ev.t === 'tool-call-start' || ev.t === 'tool-call-end') && !ev.call) return 'a tool event without its call';
  return '';
}
