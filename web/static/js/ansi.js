// ANSI colours in terminal output, rendered as spans of text: SGR codes
// (bold, dim, italic, underline, 16, 256 and 24-bit colours) become classes
// or CSSOM colours; every other escape sequence is dropped. Nothing is
// parsed as HTML.

import { h } from './dom.js';

// eslint-disable-next-line no-control-regex
const reEsc = /\x1b\[([0-9;:]*)([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/g;

/** stripAnsi returns text without escape sequences. */
export function stripAnsi(s) {
  return String(s ?? '').replace(reEsc, '');
}

/** hasAnsi says whether s holds an escape sequence. */
export function hasAnsi(s) {
  return String(s ?? '').includes('\x1b');
}

const base = ['black', 'red', 'green', 'yellow', 'blue', 'magenta', 'cyan', 'white'];

function color256(n) {
  if (n < 16) return { cls: (n >= 8 ? 'br-' : '') + base[n % 8] };
  if (n < 232) {
    const v = [0, 95, 135, 175, 215, 255];
    const i = n - 16;
    return { rgb: [v[Math.floor(i / 36)], v[Math.floor(i / 6) % 6], v[i % 6]] };
  }
  const g = 8 + (n - 232) * 10;
  return { rgb: [g, g, g] };
}

/** renderAnsi returns a fragment of s with its colours as spans. */
export function renderAnsi(s) {
  const text = String(s ?? '');
  const frag = document.createDocumentFragment();
  let st = {};
  let last = 0;
  const emit = (t) => {
    if (!t) return;
    const cls = [];
    if (st.bold) cls.push('ansi-bold');
    if (st.dim) cls.push('ansi-dim');
    if (st.italic) cls.push('ansi-italic');
    if (st.underline) cls.push('ansi-underline');
    if (st.fg?.cls) cls.push('ansi-' + st.fg.cls);
    if (st.bg?.cls) cls.push('ansi-bg-' + st.bg.cls);
    if (!cls.length && !st.fg?.rgb && !st.bg?.rgb) { frag.append(t); return; }
    const span = h('span', { class: cls.join(' ') || null, text: t });
    if (st.fg?.rgb) span.style.color = `rgb(${st.fg.rgb.join(',')})`;
    if (st.bg?.rgb) span.style.backgroundColor = `rgb(${st.bg.rgb.join(',')})`;
    frag.append(span);
  };
  reEsc.lastIndex = 0;
  let m;
  while ((m = reEsc.exec(text))) {
    emit(text.slice(last, m.index));
    last = reEsc.lastIndex;
    if (m[2] === 'm') st = sgr(st, m[1]);
  }
  emit(text.slice(last));
  return frag;
}

function sgr(prev, params) {
  const st = { ...prev };
  const ps = (params || '0').split(/[;:]/).map((p) => (p === '' ? 0 : parseInt(p, 10)));
  for (let i = 0; i < ps.length; i++) {
    const p = ps[i];
    if (p === 0) { for (const k of Object.keys(st)) delete st[k]; }
    else if (p === 1) st.bold = true;
    else if (p === 2) st.dim = true;
    else if (p === 3) st.italic = true;
    else if (p === 4) st.underline = true;
    else if (p === 22) { st.bold = false; st.dim = false; }
    else if (p === 23) st.italic = false;
    else if (p === 24) st.underline = false;
    else if (p >= 30 && p <= 37) st.fg = { cls: base[p - 30] };
    else if (p >= 90 && p <= 97) st.fg = { cls: 'br-' + base[p - 90] };
    else if (p >= 40 && p <= 47) st.bg = { cls: base[p - 40] };
    else if (p >= 100 && p <= 107) st.bg = { cls: 'br-' + base[p - 100] };
    else if (p === 39) delete st.fg;
    else if (p === 49) delete st.bg;
    else if (p === 38 || p === 48) {
      let c = null;
      if (ps[i + 1] === 5 && ps[i + 2] >= 0 && ps[i + 2] <= 255) { c = color256(ps[i + 2]); i += 2; }
      else if (ps[i + 1] === 2 && ps.length >= i + 5) {
        const rgb = ps.slice(i + 2, i + 5).map((v) => Math.max(0, Math.min(255, v | 0)));
        c = { rgb };
        i += 4;
      } else break;
      if (p === 38) st.fg = c; else st.bg = c;
    }
  }
  return st;
}
