// The usage page (#/usage): tokens and cost per project and per day over
// the last 30 days, drawn as SVG by the app itself, with the numbers as a
// table and per-session totals. It is computed on this device from the
// sessions it keeps (offline.js: the envelopes read here, sealed ones as
// opened), so it works offline and the relay, which cannot read a sealed
// session's usage, takes no part. A turn's cost is what Claude reported for
// it (remote mode's turnCosts) where the session's info carries it, and
// otherwise an estimate from the price table (prices.js) when the
// session's model is in it; tokens of a model without a price are counted
// with no cost.

import { h } from './dom.js';
import { baseName, oneLine, tokens as fmtTokens } from './format.js';
import { loadSession, savedSessions } from './offline.js';
import { PRICES_DATE, PRICES_SOURCE, estimate, priceOf } from './prices.js';

export const USAGE_DAYS = 30;
const COLORS = ['#3b6fd8', '#d4582a', '#2f9e44', '#9c36b5', '#b07d00', '#0b8793', '#d6336c', '#5c6b7a'];

function emptyCell() {
  return { input: 0, output: 0, cacheWrite: 0, cacheRead: 0, tokens: 0, cost: 0, costed: false, reported: 0, estimated: 0, uncosted: 0 };
}

function addTokens(c, t) {
  c.input += t.input; c.output += t.output; c.cacheWrite += t.cacheWrite; c.cacheRead += t.cacheRead;
  c.tokens += t.input + t.output + t.cacheWrite + t.cacheRead;
}

function addCost(c, usd, how) {
  c.cost += usd;
  c.costed = true;
  c[how] += usd;
}

function count(v) { return Number.isFinite(v) && v >= 0 ? v : 0; }

/** dayKey is the local date of a time in ms, YYYY-MM-DD. */
export function dayKey(ms) {
  const d = new Date(ms);
  return d.getFullYear() + '-' + String(d.getMonth() + 1).padStart(2, '0') + '-' + String(d.getDate()).padStart(2, '0');
}

/**
 * computeUsage adds up the usage of sessions [{id, summary, items:
 * [[seq, envelope]]}] over the USAGE_DAYS days that end on now's day.
 * It returns {days: [{key, cells: Map project -> cell}], projects:
 * [{name, color}], sessions: [{id, title, project, model, cell}], total}.
 */
export function computeUsage(sessions, now = Date.now()) {
  const keys = [];
  const end = new Date(now);
  for (let i = USAGE_DAYS - 1; i >= 0; i--) keys.push(dayKey(new Date(end.getFullYear(), end.getMonth(), end.getDate() - i, 12).getTime()));
  const inWindow = new Set(keys);
  const days = new Map(keys.map((k) => [k, new Map()]));
  const total = emptyCell();
  const perProject = new Map();
  const out = [];
  for (const s of sessions) {
    const info = s.summary?.info || {};
    const project = info.cwd ? baseName(info.cwd) || info.cwd : 'Unknown project';
    const model = typeof info.model === 'string' ? info.model : '';
    const price = priceOf(model);
    const turnCosts = info.turnCosts instanceof Map ? info.turnCosts : new Map();
    const cell = emptyCell();
    const costedTurns = new Set();
    for (const [, env] of s.items || []) {
      const u = env?.usage;
      if (!u || typeof u !== 'object' || !Number.isFinite(env.time)) continue;
      const key = dayKey(env.time);
      if (!inWindow.has(key)) continue;
      const t = { input: count(u.input_tokens), output: count(u.output_tokens), cacheWrite: count(u.cache_creation_input_tokens), cacheRead: count(u.cache_read_input_tokens) };
      const day = days.get(key);
      if (!day.has(project)) day.set(project, emptyCell());
      const cells = [day.get(project), cell, total];
      if (!perProject.has(project)) perProject.set(project, 0);
      perProject.set(project, perProject.get(project) + t.input + t.output + t.cacheWrite + t.cacheRead);
      for (const c of cells) addTokens(c, t);
      const reported = typeof env.turn === 'string' ? turnCosts.get(env.turn) : undefined;
      if (Number.isFinite(reported)) {
        // Claude's own figure for the whole turn, counted once, on the
        // day of the turn's first usage.
        if (!costedTurns.has(env.turn)) {
          costedTurns.add(env.turn);
          for (const c of cells) addCost(c, reported, 'reported');
        }
      } else if (price) {
        const usd = estimate(t, price);
        for (const c of cells) addCost(c, usd, 'estimated');
      } else {
        for (const c of cells) c.uncosted += t.input + t.output + t.cacheWrite + t.cacheRead;
      }
    }
    if (cell.tokens > 0) out.push({ id: s.id, title: oneLine(s.summary?.info?.title || s.summary?.prompt || s.id, 80), project, model, cell });
  }
  const projects = [...perProject.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .map(([name], i) => ({ name, color: COLORS[i % COLORS.length] }));
  out.sort((a, b) => b.cell.tokens - a.cell.tokens);
  return { days: keys.map((key) => ({ key, cells: days.get(key) })), projects, sessions: out, total };
}

/** usd writes dollars: cents, or more digits below a cent. */
export function usd(v) {
  if (v === 0) return '$0.00';
  return '$' + (v < 0.01 ? v.toFixed(4) : v.toFixed(2));
}

const SVG = 'http://www.w3.org/2000/svg';
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v != null) el.setAttribute(k, String(v));
  el.append(...children.filter(Boolean));
  return el;
}

// chart draws stacked bars per day, a segment per project, of what value
// gives (tokens or dollars); each segment names its numbers in data-*.
function chart(u, { label, value, format }) {
  const W = 320; const H = 150; const left = 4; const top = 16; const bottom = 18;
  const plotH = H - top - bottom;
  const slot = (W - left) / u.days.length;
  const max = Math.max(0, ...u.days.map((d) => [...d.cells.values()].reduce((n, c) => n + value(c), 0)));
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label + '; the numbers are in the table below', class: 'usage-chart' });
  svg.append(s('line', { x1: left, x2: W, y1: top + plotH + 0.5, y2: top + plotH + 0.5, class: 'axis' }));
  svg.append(s('text', { x: left, y: 11, class: 'tick' }, max > 0 ? 'max ' + format(max) : 'nothing yet'));
  u.days.forEach((d, i) => {
    const x = left + i * slot + 1;
    let y = top + plotH;
    const g = s('g', { class: 'usage-day', 'data-day': d.key });
    for (const p of u.projects) {
      const c = d.cells.get(p.name);
      if (!c || value(c) <= 0) continue;
      const hgt = max > 0 ? (value(c) / max) * plotH : 0;
      y -= hgt;
      g.append(s('rect', {
        class: 'usage-bar', x: x.toFixed(2), y: y.toFixed(2), width: Math.max(1, slot - 2).toFixed(2), height: Math.max(hgt, 0.5).toFixed(2), fill: p.color,
        'data-day': d.key, 'data-project': p.name, 'data-tokens': c.tokens, 'data-input': c.input, 'data-output': c.output,
        'data-cache-write': c.cacheWrite, 'data-cache-read': c.cacheRead, 'data-cost': c.costed ? c.cost.toFixed(6) : '', 'data-uncosted': c.uncosted,
      }));
    }
    svg.append(g);
    if (i === 0 || i === u.days.length - 1 || i === Math.floor(u.days.length / 2)) {
      svg.append(s('text', { x: i === u.days.length - 1 ? W : x, y: H - 4, class: 'tick', 'text-anchor': i === u.days.length - 1 ? 'end' : 'start' }, d.key.slice(5)));
    }
  });
  return svg;
}

function costText(c) {
  if (!c.costed) return c.tokens ? 'no price' : '—';
  return usd(c.cost) + (c.estimated > 0 ? ' (est.)' : '');
}

function table(u) {
  const rows = [];
  for (const d of [...u.days].reverse()) {
    for (const p of u.projects) {
      const c = d.cells.get(p.name);
      if (!c) continue;
      rows.push(h('tr', { 'data-day': d.key, 'data-project': p.name },
        h('th', { scope: 'row', text: d.key }), h('td', { text: p.name }),
        ...[c.input, c.output, c.cacheWrite, c.cacheRead].map((n) => h('td', { class: 'num', text: String(n) })),
        h('td', { class: 'num cost', text: costText(c) })));
    }
  }
  return h('table', { class: 'usage-table' },
    h('caption', { text: 'Tokens and cost per day and project' }),
    h('thead', null, h('tr', null, ...['Day', 'Project', 'Input', 'Output', 'Cache write', 'Cache read', 'Cost'].map((t) => h('th', { scope: 'col', text: t })))),
    h('tbody', null, rows.length ? rows : h('tr', null, h('td', { colspan: 7, text: 'No usage in the last 30 days.' }))));
}

function sessionList(u) {
  return h('ul', { class: 'usage-sessions' }, u.sessions.map((x) => h('li', { 'data-session': x.id, 'data-tokens': x.cell.tokens, 'data-cost': x.cell.costed ? x.cell.cost.toFixed(6) : '',
    'data-input': x.cell.input, 'data-output': x.cell.output, 'data-cache-write': x.cell.cacheWrite, 'data-cache-read': x.cell.cacheRead },
    h('a', { href: '#/s/' + encodeURIComponent(x.id), text: x.title }),
    h('div', { class: 'usage-meta', text: [x.project, x.model || 'model not reported'].join(' · ') }),
    h('div', { class: 'usage-meta', text: `${fmtTokens(x.cell.tokens)} tokens (in ${fmtTokens(x.cell.input)}, out ${fmtTokens(x.cell.output)}, cache write ${fmtTokens(x.cell.cacheWrite)}, cache read ${fmtTokens(x.cell.cacheRead)}) · ${costText(x.cell)}` }))));
}

/** renderUsage draws what computeUsage returned into el. */
export function renderUsage(el, u, kept) {
  const t = u.total;
  el.replaceChildren(
    h('p', { class: 'usage-total' }, h('strong', { text: fmtTokens(t.tokens) + ' tokens' }), ' · ', h('strong', { class: 'usage-total-cost', text: t.costed ? usd(t.cost) : 'no cost known' }),
      t.uncosted ? ' · ' + fmtTokens(t.uncosted) + ' tokens of models without a price' : ''),
    h('p', { class: 'usage-estimate', text: `Costs are estimates: Claude's own figure for a turn where it reported one (remote mode), otherwise ${PRICES_SOURCE} of ${PRICES_DATE} for the session's model. Counted on this device from the ${kept} sessions it keeps.` }),
    h('h2', { text: 'Tokens per day' }),
    chart(u, { label: `Tokens per day over the last ${USAGE_DAYS} days, stacked by project: ${t.tokens} in all`, value: (c) => c.tokens, format: fmtTokens }),
    h('h2', { text: 'Cost per day (estimate)' }),
    chart(u, { label: `Estimated cost per day over the last ${USAGE_DAYS} days, stacked by project: ${usd(t.cost)} in all`, value: (c) => c.cost, format: usd }),
    h('ul', { class: 'usage-legend', 'aria-label': 'Projects' }, u.projects.map((p) => h('li', null, h('span', { class: 'swatch', style: null, 'data-color': p.color }), p.name))),
    h('details', { class: 'usage-table-wrap' }, h('summary', { text: 'As a table' }), table(u)),
    h('details', { class: 'usage-per-session' }, h('summary', { text: `Per session (${u.sessions.length})` }), sessionList(u)));
  // Colors through the CSSOM: the page's policy allows no inline style attributes.
  for (const sw of el.querySelectorAll('.swatch')) sw.style.background = sw.dataset.color;
}

/**
 * usagePage shows the usage page in root under bar; live gives the
 * session summaries the app holds now (their info, turn costs included,
 * is newer than what was kept with the envelopes).
 */
export function usagePage(root, bar, live) {
  document.title = 'Usage · ccrelay';
  const body = h('div', { class: 'usage-body', 'aria-busy': 'true' }, h('p', { text: 'Adding up…' }));
  root.replaceChildren(bar, h('main', { class: 'usage-page' }, body));
  window.scrollTo(0, 0);
  let left = false;
  (async () => {
    const kept = await savedSessions();
    const sessions = [];
    for (const k of kept) {
      const saved = await loadSession(k.id);
      if (!saved) continue;
      const now = live().get(k.id);
      sessions.push({ id: k.id, summary: now || saved.summary, items: saved.items });
    }
    if (left) return;
    renderUsage(body, computeUsage(sessions), sessions.length);
    body.removeAttribute('aria-busy');
    document.body.dataset.usage = 'drawn';
  })().catch((e) => {
    console.error(e);
    if (!left) body.replaceChildren(h('p', { text: 'The kept sessions could not be read: ' + (e.message || e) }));
  });
  return { leave() { left = true; delete document.body.dataset.usage; } };
}
