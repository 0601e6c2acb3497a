// Claude Code's markup in user records: slash commands, their output, IDE
// selections and opened files, system reminders. Shown as small chips,
// never as raw tags.

import { h } from './dom.js';

const reTag = /<(command-name|command-message|command-args|command-contents|local-command-stdout|local-command-stderr|ide_selection|ide_opened_file|system-reminder|bash-input|bash-stdout|bash-stderr)>([\s\S]*?)<\/\1>/g;

const base = (p) => String(p).split(/[\\/]/).pop();

/**
 * parseMarkup splits a user text into chips [{kind, label, detail}] and the
 * words the person typed (rest). A text without markup has no chips.
 */
export function parseMarkup(text) {
  const s = String(text ?? '');
  const tags = {};
  const order = [];
  const rest = s.replace(reTag, (_, name, body) => {
    if (!(name in tags)) order.push(name);
    tags[name] = (tags[name] ? tags[name] + '\n' : '') + body.trim();
    return '';
  }).trim();
  const chips = [];
  if (tags['command-name'] != null || tags['command-message'] != null) {
    const name = tags['command-name'] || '/' + String(tags['command-message']).split(/\s/)[0];
    const args = tags['command-args'] || '';
    chips.push({ kind: 'command', label: (name + ' ' + args).trim().slice(0, 200), detail: tags['command-contents'] || '' });
  }
  for (const name of order) {
    const body = tags[name];
    switch (name) {
      case 'local-command-stdout':
      case 'local-command-stderr':
      case 'bash-stdout':
      case 'bash-stderr':
        if (body) chips.push({ kind: name.endsWith('stderr') ? 'stderr' : 'output', label: body.split('\n')[0].slice(0, 120), detail: body });
        break;
      case 'bash-input':
        chips.push({ kind: 'command', label: '! ' + body.slice(0, 200), detail: '' });
        break;
      case 'ide_selection': {
        const m = /lines (\d+) to (\d+) from (.+?):\n/.exec(body);
        chips.push({ kind: 'selection', label: m ? `selection in ${base(m[3])}:${m[1]}${m[2] !== m[1] ? '-' + m[2] : ''}` : 'selection in the editor', detail: body });
        break;
      }
      case 'ide_opened_file': {
        const m = /opened the file (.+?) in the IDE/.exec(body);
        chips.push({ kind: 'file', label: m ? 'opened ' + base(m[1]) : 'a file opened in the editor', detail: body });
        break;
      }
      case 'system-reminder':
        chips.push({ kind: 'reminder', label: 'system reminder', detail: body });
        break;
      default:
        break;
    }
  }
  return { chips, rest };
}

/** renderChips returns the chips as buttons that show their detail. */
export function renderChips(chips) {
  return h('div', { class: 'markup-chips' }, chips.map((c) => {
    if (!c.detail || c.detail === c.label) return h('span', { class: 'mchip ' + c.kind, 'data-kind': c.kind, text: c.label });
    return h('details', { class: 'mchip ' + c.kind, 'data-kind': c.kind }, h('summary', { text: c.label }), h('pre', { class: 'code', text: c.detail.slice(0, 20000) }));
  }));
}
