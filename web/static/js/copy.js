// Copying to the clipboard: the buttons on code blocks, commands, tool
// output, prompts and replies. The asynchronous clipboard API where the
// page may use it (a secure context: https, or http on 127.0.0.1); else,
// or when it refuses, a hidden textarea copied with execCommand('copy'),
// which works on plain http (a relay on a LAN address).

import { fill, h, icon } from './dom.js';

// COPIED_MS is how long a button shows that it copied.
export const COPIED_MS = 1500;

let live = null; // the status region that says "Copied" to screen readers

function say(text) {
  if (!live || !live.isConnected) {
    live = h('div', { class: 'sr-only', role: 'status' });
    document.body.append(live);
  }
  live.textContent = '';
  live.textContent = text;
}

/** copyText puts text on the clipboard; true when it did. */
export async function copyText(text) {
  const s = String(text ?? '');
  if (window.isSecureContext && navigator.clipboard?.writeText) {
    try {
      await navigator.clipboard.writeText(s);
      return true;
    } catch {
      // Refused (no permission, the page not focused): try the old way.
    }
  }
  return copyByCommand(s);
}

// copyByCommand copies through a hidden textarea and execCommand, keeping
// the reader's selection and focus.
function copyByCommand(s) {
  const ta = h('textarea', { class: 'copy-buffer', readonly: true, 'aria-hidden': 'true', tabindex: '-1' });
  ta.value = s;
  const focused = document.activeElement;
  const sel = document.getSelection();
  const ranges = [];
  for (let i = 0; sel && i < sel.rangeCount; i++) ranges.push(sel.getRangeAt(i));
  document.body.append(ta);
  ta.select();
  ta.setSelectionRange(0, s.length);
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } catch {
    ok = false;
  }
  ta.remove();
  if (sel) {
    sel.removeAllRanges();
    for (const r of ranges) sel.addRange(r);
  }
  if (focused instanceof HTMLElement) focused.focus({ preventScroll: true });
  return ok;
}

/**
 * copyButton is a button that copies text (a string, or a function giving
 * it when clicked); label names what it copies ("Copy code").
 */
export function copyButton(label, text) {
  const btn = h('button', { class: 'copy-btn', type: 'button', 'aria-label': label, title: label }, icon('copy'));
  let timer = 0;
  btn.addEventListener('click', async (e) => {
    e.preventDefault();
    e.stopPropagation(); // inside a card's summary it must not toggle the card
    const ok = await copyText(typeof text === 'function' ? text() : text);
    btn.dataset.copied = ok ? 'yes' : 'no';
    fill(btn, icon(ok ? 'check' : 'cross'));
    say(ok ? 'Copied' : 'Could not copy: select the text and copy it instead');
    clearTimeout(timer);
    timer = setTimeout(() => { delete btn.dataset.copied; fill(btn, icon('copy')); }, COPIED_MS);
  });
  return btn;
}

/** copyable wraps el (a code block) with a copy button in its corner. */
export function copyable(el, label, text) {
  return h('div', { class: 'copyable' }, el, copyButton(label, text));
}
