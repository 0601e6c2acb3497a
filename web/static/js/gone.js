// What the app says of a session no ccrelay holds: the relay marks it
// (cliGone) when its CLI's connection ended and did not come back, and
// tells a ccrelay that stopped (it closed its connection itself:
// cliStopped) from a connection lost (the machine off or offline, ccrelay
// killed). The mark goes when the CLI is back and announces itself. A
// session that says it ended (nothing can run it again: a Codex thread
// Codex never wrote) says so instead, whether a CLI holds it or not, and
// offers no command to resume it.

import { h, icon } from './dom.js';

/**
 * goneState says what is true of a session the relay marked, or that the
 * page found without its CLI (live: the relay answered /status so), or
 * that ended: null while a ccrelay holds it and it can go on (or it never
 * ran: a recording, a session no ccrelay announced, a machine, which says
 * it itself).
 */
export function goneState(info, live = false) {
  if (!info || info.recording || !info.mode || info.mode === 'machine') return null;
  // Nothing can run it again, whether a ccrelay holds it or not: no
  // command to resume it, and where it goes on when that is known.
  if (info.ended) {
    return {
      kind: 'ended',
      text: 'Cannot go on',
      note: 'This ' + (info.agent === 'codex' ? 'Codex' : 'Claude') + ' session cannot go on: nothing can run it again, and nothing sent to it is run.'
        + (info.continuedAs ? ' It goes on as a new session, ' + info.continuedAs + '.' : ''),
    };
  }
  if (!info.cliGone && !live) return null;
  if (info.cliGone && info.cliStopped) {
    return {
      kind: 'stopped',
      text: 'ccrelay stopped',
      note: 'ccrelay stopped on ' + (info.machine || 'its machine') + ': nothing runs this session now. What you send waits on the relay until ccrelay runs it again ('
        + (info.agent === 'codex' ? 'ccrelay codex resume with its id' : 'ccrelay --resume') + ' in its folder).',
    };
  }
  return {
    kind: 'offline',
    text: 'Machine offline',
    note: (info?.agent === 'codex' ? 'Codex' : 'Claude') + '\'s machine is offline: the relay is reachable, but ccrelay is not connected for this session. What you send waits on the relay until it is back; check the machine (is it awake, is ccrelay running?).',
  };
}

/** goneChip is the list's mark of a session the relay marked: an icon and words, never a colour alone. */
export function goneChip(info) {
  const g = goneState(info);
  if (!g) return null;
  return h('span', { class: 'chip warn gone', 'data-gone': g.kind, title: info.error && g.kind !== 'stopped' ? info.error : g.note }, icon(g.kind === 'stopped' ? 'unplug' : g.kind === 'ended' ? 'cross' : 'offline', 'chip-icon'), g.text);
}
