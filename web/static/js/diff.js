// Line diffs for the app: Myers' O(ND) algorithm over lines, hunks with
// context, and a word-level diff inside changed lines. Output is DOM built
// from text nodes.

import { h } from './dom.js';

// MAX_EDITS bounds the work of one diff: past this many inserted and
// deleted lines (or words) the diff is shown as "all old, then all new".
export const MAX_EDITS = 2000;
// CONTEXT is the unchanged lines kept around each change.
export const CONTEXT = 3;
// MAX_WORD_LINE is the longest line (characters) diffed word by word.
export const MAX_WORD_LINE = 600;

/**
 * diff returns the edit script of a into b (arrays compared with ===):
 * [{op: '=' | '-' | '+', a: index in a or -1, b: index in b or -1}].
 */
export function diff(a, b) {
  // Common prefix and suffix cost nothing.
  let pre = 0;
  while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
  let suf = 0;
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
  const out = [];
  for (let i = 0; i < pre; i++) out.push({ op: '=', a: i, b: i });
  const mid = myers(a.slice(pre, a.length - suf), b.slice(pre, b.length - suf));
  for (const e of mid) out.push({ op: e.op, a: e.a < 0 ? -1 : e.a + pre, b: e.b < 0 ? -1 : e.b + pre });
  for (let i = suf; i > 0; i--) out.push({ op: '=', a: a.length - i, b: b.length - i });
  return out;
}

function myers(a, b) {
  const n = a.length;
  const m = b.length;
  const all = () => [...a.map((_, i) => ({ op: '-', a: i, b: -1 })), ...b.map((_, i) => ({ op: '+', a: -1, b: i }))];
  if (n === 0 || m === 0) return all();
  const max = n + m;
  const off = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace = [];
  for (let d = 0; d <= max; d++) {
    if (d > MAX_EDITS) return all();
    trace.push(v.slice(off - d - 1, off + d + 2));
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[off + k - 1] < v[off + k + 1]) ? v[off + k + 1] : v[off + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) { x++; y++; }
      v[off + k] = x;
      if (x >= n && y >= m) return backtrack(trace, n, m);
    }
  }
  return all();
}

function backtrack(trace, n, m) {
  const ops = [];
  let x = n;
  let y = m;
  for (let d = trace.length - 1; d >= 0; d--) {
    const vs = trace[d];
    const g = (k) => vs[k + d + 1];
    const k = x - y;
    const pk = k === -d || (k !== d && g(k - 1) < g(k + 1)) ? k + 1 : k - 1;
    const px = g(pk);
    const py = px - pk;
    while (x > px && y > py) { ops.push({ op: '=', a: x - 1, b: y - 1 }); x--; y--; }
    if (d > 0) {
      if (x === px) ops.push({ op: '+', a: -1, b: y - 1 });
      else ops.push({ op: '-', a: x - 1, b: -1 });
      x = px;
      y = py;
    }
  }
  return ops.reverse();
}

/** splitLines splits text into lines (a final newline ends the last line). */
export function splitLines(s) {
  const t = String(s ?? '');
  if (t === '') return [];
  const ls = t.split('\n');
  if (ls[ls.length - 1] === '') ls.pop();
  return ls;
}

/**
 * lineDiff compares two texts by line and returns rows with line numbers
 * (from oldStart/newStart, 1 when unknown) and word-level marks:
 * {op, old, new, text, words?: [{text, changed}]}, and counts.
 */
export function lineDiff(oldText, newText, oldStart = 1, newStart = 1) {
  const a = splitLines(oldText);
  const b = splitLines(newText);
  const script = diff(a, b);
  const rows = script.map((e) => ({ op: e.op, old: e.a >= 0 ? e.a + oldStart : null, new: e.b >= 0 ? e.b + newStart : null, text: e.a >= 0 ? a[e.a] : b[e.b] }));
  // Pair each run of deleted lines with the added lines after it, line by
  // line, and mark the words that changed.
  for (let i = 0; i < rows.length;) {
    if (rows[i].op !== '-') { i++; continue; }
    let j = i;
    while (j < rows.length && rows[j].op === '-') j++;
    let k = j;
    while (k < rows.length && rows[k].op === '+') k++;
    for (let p = 0; p < Math.min(j - i, k - j); p++) wordMarks(rows[i + p], rows[j + p]);
    i = k;
  }
  return { rows, added: rows.filter((r) => r.op === '+').length, removed: rows.filter((r) => r.op === '-').length };
}

const reWord = /\w+|\s+|[^\w\s]/gu;

function wordMarks(del, add) {
  if (del.text.length > MAX_WORD_LINE || add.text.length > MAX_WORD_LINE) return;
  const a = del.text.match(reWord) || [];
  const b = add.text.match(reWord) || [];
  const script = diff(a, b);
  const same = script.filter((e) => e.op === '=').reduce((n, e) => n + a[e.a].trim().length, 0);
  // Lines with almost nothing in common are shown whole.
  if (same < Math.min(del.text.trim().length, add.text.trim().length) / 3) return;
  del.words = [];
  add.words = [];
  for (const e of script) {
    if (e.op !== '+') push(del.words, a[e.a], e.op === '-');
    if (e.op !== '-') push(add.words, b[e.b], e.op === '+');
  }
}

function push(words, text, changed) {
  const last = words[words.length - 1];
  if (last && last.changed === changed) last.text += text;
  else words.push({ text, changed });
}

/**
 * hunks groups rows into hunks with CONTEXT unchanged lines around each
 * change; skipped stretches become {skip: n} rows.
 */
export function hunks(rows, context = CONTEXT) {
  const keep = new Array(rows.length).fill(false);
  rows.forEach((r, i) => {
    if (r.op === '=') return;
    for (let k = Math.max(0, i - context); k <= Math.min(rows.length - 1, i + context); k++) keep[k] = true;
  });
  const out = [];
  let skipped = 0;
  rows.forEach((r, i) => {
    if (keep[i]) {
      if (skipped) out.push({ skip: skipped });
      skipped = 0;
      out.push(r);
    } else skipped++;
  });
  if (skipped && out.length) out.push({ skip: skipped });
  return out.length ? out : rows; // no change at all: every line
}

/** renderDiff returns the diff of two texts as rows of a table-like grid. */
export function renderDiff(oldText, newText, { oldStart = null, newStart = null, maxRows = 400 } = {}) {
  const d = lineDiff(oldText, newText, oldStart || 1, newStart || 1);
  const numbered = oldStart != null || newStart != null;
  const el = h('div', { class: 'diff' + (numbered ? ' numbered' : ''), role: 'table', 'aria-label': `Diff: ${d.added} added, ${d.removed} removed` });
  const shown = hunks(d.rows);
  const rowEl = (r) => {
    if (r.skip) return h('div', { class: 'dl skip', role: 'row' }, h('span', { class: 'tx', text: `⋯ ${r.skip} unchanged line${r.skip === 1 ? '' : 's'}` }));
    const cls = r.op === '-' ? 'del' : r.op === '+' ? 'add' : 'ctx';
    const tx = h('span', { class: 'tx' });
    if (r.words) for (const w of r.words) tx.append(w.changed ? h('mark', { text: w.text }) : w.text);
    else tx.textContent = r.text;
    return h('div', { class: 'dl ' + cls, role: 'row', 'data-op': r.op },
      numbered ? h('span', { class: 'ln', text: r.old ?? '' }) : null,
      numbered ? h('span', { class: 'ln', text: r.new ?? '' }) : null,
      h('span', { class: 'sign', 'aria-hidden': 'true', text: r.op === '=' ? ' ' : r.op }), tx);
  };
  el.append(...shown.slice(0, maxRows).map(rowEl));
  if (shown.length > maxRows) {
    const more = h('button', { class: 'show-all', type: 'button', text: `Show ${shown.length - maxRows} more lines`, onclick: () => { more.remove(); el.append(...shown.slice(maxRows).map(rowEl)); } });
    el.append(more);
  }
  return { el, added: d.added, removed: d.removed };
}
