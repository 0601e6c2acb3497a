// Small DOM helpers. Text only ever reaches the page through textContent
// or text nodes: nothing here parses HTML.

/** h builds an element: h('div', {class: 'x', onclick: f}, child, 'text'). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = v;
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

/** append adds children (nodes, strings, arrays; null skipped) to el. */
export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

/** fill replaces the children of el (null and false skipped). */
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/**
 * prose turns a message that names commands between backticks (run
 * `ccrelay pair`) into nodes: each command as code, the rest as text.
 * Nothing else is read as Markdown; a backtick without its pair stays.
 */
export function prose(text) {
  const parts = String(text).split('`');
  return parts.map((part, i) => (i % 2 === 0 ? part : i < parts.length - 1 ? h('code', { class: 'cmd', text: part }) : '`' + part));
}

/** icon returns an inline SVG icon (stroked paths from ICONS). */
export function icon(name, cls = '') {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('class', ('icon ' + cls).trim());
  svg.setAttribute('aria-hidden', 'true');
  const path = document.createElementNS(ns, 'path');
  path.setAttribute('d', ICONS[name] || '');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.append(path);
  return svg;
}

const ICONS = {
  back: 'M15 5l-7 7 7 7',
  send: 'M5 12h13M12 5l7 7-7 7',
  stop: 'M7 7h10v10H7z',
  chevron: 'M9 6l6 6-6 6',
  tool: 'M14.7 6.3a4 4 0 0 0-5.4 5.4L4 17v3h3l5.3-5.3a4 4 0 0 0 5.4-5.4l-2.5 2.5-2.4-.6-.6-2.4z',
  agent: 'M12 3l2.4 4.9 5.4.8-3.9 3.8.9 5.4L12 15.4 7.2 17.9l.9-5.4L4.2 8.7l5.4-.8z',
  check: 'M5 12.5l4.5 4.5L19 7.5',
  cross: 'M6 6l12 12M18 6L6 18',
  dots: 'M5 12h.01M12 12h.01M19 12h.01',
  shield: 'M12 3l7 3v5c0 5-3.5 8.5-7 10-3.5-1.5-7-5-7-10V6z',
  terminal: 'M4 5h16v14H4zM7 9l3 3-3 3M12 15h5',
  phone: 'M8 3h8v18H8zM11 18h2',
  down: 'M12 5v14M5 12l7 7 7-7',
  bell: 'M6 16V11a6 6 0 0 1 12 0v5l2 2H4zM10 20a2 2 0 0 0 4 0',
  copy: 'M9 9h11v11H9zM15 9V4H4v11h5',
  search: 'M10.5 17a6.5 6.5 0 1 0 0-13 6.5 6.5 0 0 0 0 13zM15.5 15.5L20 20',
  up: 'M12 19V5M5 12l7-7 7 7',
  plus: 'M12 5v14M5 12h14',
  // A session whose machine is gone: a cloud struck through.
  offline: 'M7 18h9.5a3.5 3.5 0 0 0 .9-6.9A5.5 5.5 0 0 0 8.2 8.4 4.5 4.5 0 0 0 7 18zM4 4l16 16',
  // A session whose ccrelay stopped: a plug, pulled out.
  unplug: 'M9 3v4M15 3v4M7 7h10v3a5 5 0 0 1-10 0zM12 15v6',
  chart: 'M4 20h16M7 16v-5M12 16V6M17 16v-8',
  brain: 'M9 4a3 3 0 0 0-3 3 3 3 0 0 0-2 5 3 3 0 0 0 2 5 3 3 0 0 0 6 0V4M15 4a3 3 0 0 1 3 3 3 3 0 0 1 2 5 3 3 0 0 1-2 5 3 3 0 0 1-6 0',
};
