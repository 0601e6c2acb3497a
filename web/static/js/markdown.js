// A Markdown renderer for untrusted text. It builds DOM nodes directly
// (createElement and text nodes): no string of HTML is ever parsed, so
// markup in the text shows as text. Links are kept only for http(s) and
// mailto URLs; images are shown as links (nothing is fetched).
//
// Covered: paragraphs (a single newline is a line break, as in chat),
// ATX headings, fenced and indented code (highlighted), block quotes,
// ordered, unordered and task lists (nested by indentation), GFM tables,
// thematic breaks; inline code, strong, emphasis, strike-through, links,
// autolinks and bare URLs, backslash escapes.

import { h } from './dom.js';
import { highlight } from './highlight.js';
import { copyable } from './copy.js';

const MAX_DEPTH = 12; // nesting of quotes and lists

// The page's title is its h1: a text's own headings start at h2, its
// largest level ('#', or '##' in a text without '#') becoming h2, so that
// levels on the page go down one at a time.
let topLevel = 1;

/** renderMarkdown returns a fragment with the text rendered. */
export function renderMarkdown(text) {
  const frag = document.createDocumentFragment();
  const lines = String(text ?? '').replace(/\r\n?/g, '\n').split('\n');
  topLevel = 6;
  let fence = '';
  for (const l of lines) {
    const f = reFence.exec(l);
    if (f && (!fence || f[1][0] === fence)) { fence = fence ? '' : f[1][0]; continue; }
    const m = fence ? null : reHeading.exec(l);
    if (m) topLevel = Math.min(topLevel, m[1].length);
  }
  blocks(lines, frag, 0);
  return frag;
}

/** safeURL returns url if it is http(s) or mailto, else null. */
export function safeURL(url) {
  const raw = String(url ?? '').trim();
  // eslint-disable-next-line no-control-regex
  if (!raw || /[\u0000-\u001f\u007f]/.test(raw)) return null;
  let u;
  try {
    u = new URL(raw);
  } catch {
    return null; // relative links point into the relay, not the project
  }
  return ['http:', 'https:', 'mailto:'].includes(u.protocol) ? u.href : null;
}

const reFence = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const reHeading = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const reHr = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const reQuote = /^ {0,3}> ?(.*)$/;
const reItem = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*)|$)/;
const reTableSep = /^ *\|? *:?-+:? *(?:\| *:?-+:? *)*\|? *$/;

function blocks(lines, out, depth) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (/^\s*$/.test(line)) { i++; continue; }
    let m;
    if ((m = reFence.exec(line))) {
      const fence = m[1];
      const body = [];
      i++;
      while (i < lines.length && !new RegExp('^ {0,3}' + fence[0] + '{' + fence.length + ',}\\s*$').test(lines[i])) body.push(lines[i++]);
      i++; // the closing fence (or the end: a reply still being typed)
      out.append(codeBlock(body.join('\n'), m[2]));
      continue;
    }
    if (/^( {4}|\t)/.test(line) && !reItem.test(line)) {
      const body = [];
      while (i < lines.length && (/^( {4}|\t)/.test(lines[i]) || /^\s*$/.test(lines[i]))) body.push(lines[i++].replace(/^( {4}|\t)/, ''));
      while (body.length && !body[body.length - 1].trim()) body.pop();
      out.append(codeBlock(body.join('\n'), ''));
      continue;
    }
    if ((m = reHeading.exec(line))) {
      out.append(inline(h('h' + Math.min(6, m[1].length - topLevel + 2)), m[2] || ''));
      i++;
      continue;
    }
    if (reHr.test(line)) { out.append(h('hr')); i++; continue; }
    if (reQuote.test(line)) {
      const body = [];
      while (i < lines.length && (m = reQuote.exec(lines[i]))) { body.push(m[1]); i++; }
      const q = h('blockquote');
      if (depth < MAX_DEPTH) blocks(body, q, depth + 1); else q.textContent = body.join('\n');
      out.append(q);
      continue;
    }
    if ((m = reItem.exec(line))) {
      i = list(lines, i, out, depth);
      continue;
    }
    if (line.includes('|') && i + 1 < lines.length && reTableSep.test(lines[i + 1]) && lines[i + 1].includes('-')) {
      i = table(lines, i, out);
      continue;
    }
    const para = [];
    while (i < lines.length && !/^\s*$/.test(lines[i]) && !startsBlock(lines, i)) para.push(lines[i++].trim());
    if (para.length === 0) para.push(lines[i++].trim());
    out.append(inline(h('p'), para.join('\n')));
  }
}

function startsBlock(lines, i) {
  const l = lines[i];
  return reFence.test(l) || reHeading.test(l) || reHr.test(l) || reQuote.test(l) || reItem.test(l) ||
    (l.includes('|') && i + 1 < lines.length && reTableSep.test(lines[i + 1]) && lines[i + 1].includes('-'));
}

function codeBlock(code, lang) {
  const pre = h('pre', { class: 'code' });
  const c = h('code', lang ? { 'data-lang': lang } : null);
  c.append(highlight(code, lang));
  pre.append(c);
  if (lang) pre.prepend(h('span', { class: 'lang', text: lang }));
  return copyable(pre, 'Copy code', code);
}

function list(lines, i, out, depth) {
  const first = reItem.exec(lines[i]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const el = h(ordered ? 'ol' : 'ul');
  if (ordered && parseInt(first[2], 10) !== 1) el.setAttribute('start', String(parseInt(first[2], 10)));
  while (i < lines.length) {
    const m = reItem.exec(lines[i]);
    if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
    const body = [m[3] || ''];
    const contentIndent = indent + m[2].length + 1;
    i++;
    while (i < lines.length) {
      const l = lines[i];
      if (/^\s*$/.test(l)) {
        // A blank line continues the item only if indented text follows.
        if (i + 1 < lines.length && lines[i + 1].search(/\S/) >= contentIndent) { body.push(''); i++; continue; }
        break;
      }
      const lead = l.search(/\S/);
      const mm = reItem.exec(l);
      if (mm && mm[1].length <= indent) break;
      if (lead < contentIndent && !mm && startsBlock(lines, i)) break;
      body.push(lead >= contentIndent ? l.slice(contentIndent) : l.trimStart());
      i++;
    }
    const li = h('li');
    let task = /^\[([ xX])\][ \t]+/.exec(body[0]);
    if (task) {
      body[0] = body[0].slice(task[0].length);
      li.className = 'task';
      li.append(h('span', { class: 'check' + (task[1] === ' ' ? '' : ' done'), 'aria-hidden': 'true' }));
    }
    if (depth < MAX_DEPTH && body.length > 1) {
      blocks(body, li, depth + 1);
      // A tight item's first paragraph renders as plain text.
      const p = li.querySelector(':scope > p');
      if (p && p === li.firstElementChild && li.querySelectorAll(':scope > p').length === 1) p.replaceWith(...p.childNodes);
    } else {
      inline(li, body.join('\n'));
    }
    el.append(li);
  }
  out.append(el);
  return i;
}

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
  const cells = [];
  let cur = '';
  let code = false;
  for (let k = 0; k < s.length; k++) {
    const c = s[k];
    if (c === '\\' && s[k + 1] === '|') { cur += '|'; k++; continue; }
    if (c === '`') code = !code;
    if (c === '|' && !code) { cells.push(cur.trim()); cur = ''; continue; }
    cur += c;
  }
  cells.push(cur.trim());
  return cells;
}

function table(lines, i, out) {
  const head = splitRow(lines[i]);
  const aligns = splitRow(lines[i + 1]).map((c) => (c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : ''));
  i += 2;
  const thead = h('tr', null, head.map((c, k) => inline(h('th', aligns[k] ? { class: 'al-' + aligns[k] } : null), c)));
  const tbody = h('tbody');
  while (i < lines.length && lines[i].includes('|') && !/^\s*$/.test(lines[i])) {
    const cells = splitRow(lines[i++]);
    tbody.append(h('tr', null, head.map((_, k) => inline(h('td', aligns[k] ? { class: 'al-' + aligns[k] } : null), cells[k] ?? ''))));
  }
  out.append(h('div', { class: 'table-wrap' }, h('table', null, h('thead', null, thead), tbody)));
  return i;
}

// Inline parsing: a scan with sticky patterns, each tried where it can start.
const reEscape = /\\([!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~])/y;
const reCode = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/y;
const reStrong = /(\*\*|__)(?=\S)([\s\S]*?\S)\1/y;
const reStrike = /~~(?=\S)([\s\S]*?\S)~~/y;
const reEm = /([*_])(?=[^\s*_])([\s\S]*?[^\s\\])\1/y;
const reAuto = /<((?:https?:\/\/|mailto:)[^\s<>]+)>/y;
const reBare = /https?:\/\/[^\s<>"'`]*[^\s<>"'`.,:;!?)\]}*_~]/y;

/** inline parses text into el and returns el. */
export function inline(el, text, depth = 0) {
  let buf = '';
  const flush = () => { if (buf) { el.append(buf); buf = ''; } };
  const at = (re, i) => { re.lastIndex = i; return re.exec(text); };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    let m;
    if (c === '\\') {
      if ((m = at(reEscape, i))) { buf += m[1]; i += 2; continue; }
    } else if (c === '`') {
      if ((m = at(reCode, i))) {
        flush();
        let code = m[2];
        if (/^ .* $/.test(code) && code.trim()) code = code.slice(1, -1);
        el.append(h('code', { text: code.replace(/\n/g, ' ') }));
        i += m[0].length;
        continue;
      }
      // An unmatched run of backticks is text.
      let j = i;
      while (text[j] === '`') j++;
      buf += text.slice(i, j);
      i = j;
      continue;
    } else if ((c === '*' || c === '_') && depth < MAX_DEPTH) {
      const wordBefore = i > 0 && /[\p{L}\p{N}]/u.test(text[i - 1]);
      if (!(c === '_' && wordBefore)) {
        if ((m = at(reStrong, i)) && !(c === '_' && /[\p{L}\p{N}]/u.test(text[i + m[0].length] || ''))) {
          flush(); el.append(inline(h('strong'), m[2], depth + 1)); i += m[0].length; continue;
        }
        if ((m = at(reEm, i)) && !(c === '_' && /[\p{L}\p{N}]/u.test(text[i + m[0].length] || ''))) {
          flush(); el.append(inline(h('em'), m[2], depth + 1)); i += m[0].length; continue;
        }
      }
    } else if (c === '~' && depth < MAX_DEPTH) {
      if ((m = at(reStrike, i))) { flush(); el.append(inline(h('del'), m[1], depth + 1)); i += m[0].length; continue; }
    } else if (c === '[' || (c === '!' && text[i + 1] === '[')) {
      const link = parseLink(text, c === '!' ? i + 1 : i);
      if (link) {
        flush();
        const label = c === '!' ? (link.label || 'image') : link.label;
        el.append(anchor(link.url, label, depth, c === '!'));
        i = link.end;
        continue;
      }
    } else if (c === '<') {
      if ((m = at(reAuto, i))) { flush(); el.append(anchor(m[1], m[1], MAX_DEPTH)); i += m[0].length; continue; }
    } else if (c === 'h' && (i === 0 || !/[\p{L}\p{N}/]/u.test(text[i - 1]))) {
      if ((m = at(reBare, i))) { flush(); el.append(anchor(m[0], m[0], MAX_DEPTH)); i += m[0].length; continue; }
    } else if (c === '\n') {
      flush();
      el.append(h('br'));
      i++;
      continue;
    }
    buf += c;
    i++;
  }
  flush();
  return el;
}

// parseLink reads [label](url "title") at i: {label, url, end} or null.
function parseLink(text, i) {
  let depth = 0;
  let j = i;
  for (; j < text.length; j++) {
    const c = text[j];
    if (c === '\\') { j++; continue; }
    if (c === '[') depth++;
    else if (c === ']' && --depth === 0) break;
    else if (c === '\n' && text[j + 1] === '\n') return null;
  }
  if (j >= text.length || text[j + 1] !== '(') return null;
  const label = text.slice(i + 1, j);
  let k = j + 2;
  let url = '';
  if (text[k] === '<') {
    const close = text.indexOf('>', k);
    if (close < 0) return null;
    url = text.slice(k + 1, close);
    k = close + 1;
  } else {
    let parens = 0;
    for (; k < text.length; k++) {
      const c = text[k];
      if (/\s/.test(c)) break;
      if (c === '(') parens++;
      else if (c === ')') { if (parens === 0) break; parens--; }
      url += c;
    }
  }
  const rest = /^\s*(?:"[^"]*"|'[^']*')?\s*\)/.exec(text.slice(k, k + 300));
  if (!rest) return null;
  return { label, url, end: k + rest[0].length };
}

function anchor(url, label, depth, image = false) {
  const href = safeURL(url);
  if (!href) {
    // Not a link we follow: show the label, and the target as a hint.
    const span = h('span', { class: 'link-off', title: String(url).slice(0, 200) });
    if (depth < MAX_DEPTH) return inline(span, label, depth + 1);
    span.textContent = label;
    return span;
  }
  const a = h('a', { href, target: '_blank', rel: 'noopener noreferrer nofollow' });
  if (image) a.className = 'img-link';
  if (depth < MAX_DEPTH) inline(a, label, depth + 1); else a.textContent = label;
  return a;
}
