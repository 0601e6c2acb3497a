// Machines: what a `ccrelay daemon` announces (its session's info, mode
// "machine"), and the New session sheet that starts, or resumes, a session
// there. Every field from the wire is checked before it is shown or sent
// back; the daemon checks every command again (allowed folders, modes).

import { h, icon } from './dom.js';
import { ago, baseName, shortPath } from './format.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const str = (v, n) => (typeof v === 'string' ? v.slice(0, n) : '');
const num = (v) => (Number.isFinite(v) ? v : 0);

/** cleanDaemon keeps what the app reads of a daemon's description (null when it is none). */
export function cleanDaemon(raw) {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return null;
  const folders = (Array.isArray(raw.folders) ? raw.folders : []).slice(0, 256)
    .filter((f) => f && typeof f.dir === 'string' && f.dir)
    .map((f) => ({
      dir: f.dir.slice(0, 1024), at: num(f.at),
      sessions: (Array.isArray(f.sessions) ? f.sessions : []).slice(0, 8)
        .filter((s) => s && typeof s.id === 'string' && UUID.test(s.id))
        .map((s) => ({ id: s.id, prompt: str(s.prompt, 200), at: num(s.at), agent: s.agent === 'codex' ? 'codex' : 'claude' })),
    }));
  const running = new Set((Array.isArray(raw.running) ? raw.running : []).filter((id) => typeof id === 'string' && UUID.test(id)));
  return {
    os: str(raw.os, 32), arch: str(raw.arch, 32), claudeVersion: str(raw.claudeVersion, 64), codexVersion: str(raw.codexVersion, 64), allowBypass: raw.allowBypass === true,
    roots: (Array.isArray(raw.roots) ? raw.roots : []).filter((r) => typeof r === 'string').slice(0, 16).map((r) => r.slice(0, 1024)),
    folders,
    running,
    // The start's target -> the thread it runs as (a new Codex thread:
    // Codex chose its id), as the daemon knows it: both running.
    threads: new Map(Object.entries(raw.threads && typeof raw.threads === 'object' && !Array.isArray(raw.threads) ? raw.threads : {})
      .filter(([target, thread]) => typeof thread === 'string' && running.has(target) && running.has(thread)).slice(0, 64)),
  };
}

/** machines lists the listed sessions that are machines (their daemon's), by name. */
export function machines(sessions) {
  return [...sessions.values()].filter((s) => s.info.mode === 'machine' && s.info.daemon)
    .sort((a, b) => (a.info.machine || '').localeCompare(b.info.machine || '') || (a.id < b.id ? -1 : 1));
}

/** machineOf is the machine (listed) that runs session s now, or null. */
export function machineOf(sessions, s) {
  const m = s?.info?.startedBy && sessions.get(s.info.startedBy);
  return m && m.info.mode === 'machine' && m.info.daemon ? m : null;
}

function osName(os) {
  return { linux: 'Linux', darwin: 'macOS', windows: 'Windows' }[os] || os;
}

/**
 * newSessionSheet fills dialog with the New session sheet and opens it:
 * machine → folder (recent first, searchable) → New (model, permission
 * mode, first prompt) or Resume (the folder's past sessions).
 * send(machineID, command) sends a command to a daemon and returns a
 * promise of its outcome ({ status, message }); started(sessionID, machineID) opens
 * the session once the daemon started it.
 */
export function newSessionSheet(dialog, { list, models, modes, send, started }) {
  let machine = list[0];
  let folder = null;
  let tab = 'new';
  let busy = false;
  const err = h('p', { class: 'sheet-error', role: 'alert', hidden: true });
  const machineSel = h('select', { 'aria-label': 'Machine', onchange: () => { machine = list.find((m) => m.id === machineSel.value) || list[0]; folder = null; render(); } },
    list.map((m) => h('option', { value: m.id, text: (m.info.machine || m.id.slice(0, 8)) + ' · ' + osName(m.info.daemon.os) })));
  const search = h('input', { type: 'search', placeholder: 'Search folders', 'aria-label': 'Search folders', autocomplete: 'off', oninput: () => renderFolders() });
  const other = h('input', { type: 'text', placeholder: 'Another folder (full path)', 'aria-label': 'Another folder', autocomplete: 'off', spellcheck: 'false',
    oninput: () => { folder = other.value.trim() ? { dir: other.value.trim(), sessions: [] } : null; renderFolders(false); if (tab === 'new') canStart(); else renderTab(); } });
  const folders = h('ul', { class: 'folder-list', role: 'listbox', 'aria-label': 'Folders' });
  const tabs = h('div', { class: 'tabs', role: 'tablist' });
  const body = h('div', { class: 'tab-body' });
  const model = h('select', { 'aria-label': 'Model' }, models.map((m) => h('option', { value: m, text: m })));
  // The agent a new session runs, offered when the machine has both.
  let agent = 'claude';
  const agentSel = h('select', { 'aria-label': 'Agent', onchange: () => { agent = agentSel.value; renderTab(); } });
  const mode = h('select', { 'aria-label': 'Permission mode' });
  // Typing only enables Start: the field is never rebuilt under the fingers.
  const prompt = h('textarea', { rows: 3, placeholder: 'What should Claude do?', 'aria-label': 'First prompt', oninput: () => canStart() });
  // A Codex session runs Codex's own model and asks the app for approval:
  // no model or permission mode of Claude Code's goes with it.
  const startBtn = h('button', { class: 'wide primary', type: 'button', onclick: () => go(agent === 'codex'
    ? { kind: 'start', dir: folder.dir, target: crypto.randomUUID(), text: prompt.value.trim(), agent: 'codex' }
    : { kind: 'start', dir: folder.dir, target: crypto.randomUUID(), text: prompt.value.trim(), model: model.value, mode: mode.value }) }, 'Start session');
  const machineRow = h('div', { class: 'field' });

  function render() {
    const d = machine.info.daemon;
    machineRow.replaceChildren(h('span', { text: 'Machine' }),
      list.length > 1 ? machineSel : h('div', { class: 'machine-name', text: machine.info.machine || machine.id.slice(0, 8) }),
      h('div', { class: 'meta', text: [osName(d.os), d.claudeVersion ? 'Claude Code ' + d.claudeVersion : '', d.codexVersion ? 'Codex ' + d.codexVersion : '', machine.info.cliGone ? 'daemon not connected: a request waits until it is back' : ''].filter(Boolean).join(' · ') }));
    const agents = [...(d.claudeVersion || !d.codexVersion ? [['claude', 'Claude Code']] : []), ...(d.codexVersion ? [['codex', 'Codex']] : [])];
    if (!agents.some(([v]) => v === agent)) agent = agents[0][0];
    agentSel.replaceChildren(...agents.map(([v, label]) => h('option', { value: v, text: label, selected: v === agent })));
    agentSel.dataset.count = String(agents.length);
    mode.replaceChildren(...modes.filter(([v]) => v !== 'bypassPermissions' || d.allowBypass).map(([v, label]) => h('option', { value: v, text: label })));
    other.hidden = !d.roots.length;
    if (d.roots.length) other.placeholder = 'Another folder under ' + d.roots.map(shortPath).join(', ');
    renderFolders();
    renderTab();
  }

  function renderFolders(fromSearch = true) {
    const q = search.value.trim().toLowerCase();
    const d = machine.info.daemon;
    const shown = d.folders.filter((f) => !q || f.dir.toLowerCase().includes(q));
    if (fromSearch && folder && !other.value && !shown.includes(folder)) folder = null;
    folders.replaceChildren(...shown.map((f) => {
      const selected = folder === f;
      return h('li', { role: 'option', 'aria-selected': selected ? 'true' : 'false', class: 'folder' + (selected ? ' selected' : ''), 'data-dir': f.dir, tabindex: '0',
        onclick: () => pick(f), onkeydown: (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); pick(f); } } },
        h('span', { class: 'folder-main' },
          h('span', { class: 'folder-name', text: baseName(f.dir) || f.dir }),
          h('span', { class: 'folder-dir', text: shortPath(f.dir) })),
        h('span', { class: 'meta folder-at', text: f.at ? ago(f.at) : '' }));
    }));
    if (!shown.length) {
      folders.replaceChildren(h('li', { class: 'empty-hint', text: d.folders.length ? 'No folder matches.' : (d.codexVersion ? (d.claudeVersion ? 'Neither Claude Code nor Codex has projects' : 'Codex has no projects') : 'Claude Code has no projects') + ' on this machine yet.' + (d.roots.length ? ' Type a folder below.' : ' Start ccrelay daemon with --allow DIR.') }));
    }
  }

  function pick(f) {
    folder = f;
    other.value = '';
    renderFolders(false);
    renderTab();
  }

  function canStart() { startBtn.disabled = busy || !folder || !prompt.value.trim(); }

  function renderTab() {
    const past = folder?.sessions || [];
    tabs.replaceChildren(
      h('button', { type: 'button', role: 'tab', 'aria-selected': tab === 'new' ? 'true' : 'false', class: tab === 'new' ? 'selected' : '', onclick: () => { tab = 'new'; renderTab(); } }, 'New'),
      h('button', { type: 'button', role: 'tab', 'aria-selected': tab === 'resume' ? 'true' : 'false', class: tab === 'resume' ? 'selected' : '', onclick: () => { tab = 'resume'; renderTab(); } }, 'Resume' + (past.length ? ' (' + past.length + ')' : '')));
    if (tab === 'new') {
      canStart();
      const codex = agent === 'codex';
      prompt.placeholder = codex ? 'What should Codex do?' : 'What should Claude do?';
      body.replaceChildren(...[
        agentSel.dataset.count === '1' ? null : h('label', { class: 'field' }, h('span', { text: 'Agent' }), agentSel),
        codex ? null : h('label', { class: 'field' }, h('span', { text: 'Model' }), model),
        codex ? null : h('label', { class: 'field' }, h('span', { text: 'Permission mode' }), mode),
        h('label', { class: 'field' }, h('span', { text: 'First prompt' }), prompt),
        startBtn].filter(Boolean));
      return;
    }
    if (!folder) { body.replaceChildren(h('p', { class: 'meta', text: 'Pick a folder to see its past sessions.' })); return; }
    if (!past.length) { body.replaceChildren(h('p', { class: 'meta', text: 'No past session in this folder.' })); return; }
    body.replaceChildren(h('ul', { class: 'past-sessions', 'aria-label': 'Past sessions' }, past.map((p) => h('li', { 'data-session': p.id },
      h('div', { class: 'past-main' },
        h('div', { class: 'past-prompt', text: p.prompt || p.id.slice(0, 8) }),
        h('div', { class: 'meta', text: [p.agent === 'codex' ? 'Codex' : 'Claude Code', p.at ? ago(p.at) : ''].filter(Boolean).join(' · ') })),
      machine.info.daemon.running.has(p.id)
        ? h('button', { class: 'link', type: 'button', onclick: () => started(p.id, machine.id) }, 'Open (running)')
        : h('button', { class: 'link resume', type: 'button', disabled: busy, onclick: () => go(p.agent === 'codex'
          ? { kind: 'start', dir: folder.dir, target: p.id, resume: true, agent: 'codex' }
          : { kind: 'start', dir: folder.dir, target: p.id, resume: true }) }, 'Resume')))));
  }

  async function go(cmd) {
    if (busy) return;
    busy = true;
    err.hidden = true;
    if (!cmd.text) delete cmd.text;
    if (cmd.model === 'default') delete cmd.model;
    if (cmd.mode === 'default') delete cmd.mode;
    dialog.dataset.state = 'starting';
    renderTab();
    try {
      const r = await send(machine.id, cmd);
      if (r.status === 'rejected') throw new Error(r.message || 'the machine refused');
      if (r.status === 'waiting') {
        dialog.dataset.state = 'waiting';
        err.textContent = r.message;
        err.hidden = false;
        return;
      }
      dialog.dataset.state = 'started';
      dialog.close();
      started(cmd.target, machine.id);
    } catch (e) {
      dialog.dataset.state = 'refused';
      err.textContent = 'Not started: ' + (e.message || e);
      err.hidden = false;
      err.scrollIntoView({ block: 'nearest' });
    } finally {
      busy = false;
      if (dialog.open) renderTab();
    }
  }

  dialog.replaceChildren(h('form', { method: 'dialog', class: 'sheet-body new-session' },
    h('div', { class: 'sheet-title', text: 'New session' }),
    machineRow,
    h('div', { class: 'field' }, h('span', { text: 'Folder' }), search, folders, other),
    tabs, body, err,
    h('button', { class: 'wide', value: 'close', text: 'Cancel' })));
  delete dialog.dataset.state;
  render();
  dialog.showModal();
}

/** stopButton is the Stop button of a session its machine runs (null otherwise). */
export function stopButton(machine, sessionID, send, done) {
  // done gets { status, message } as send resolves it.
  if (!machine || !machine.info.daemon.running.has(sessionID)) return null;
  return h('button', { class: 'wide danger stop-session', type: 'button', onclick: async (e) => {
    e.currentTarget.disabled = true;
    const r = await send(machine.id, { kind: 'stop', target: sessionID }).catch((err) => ({ status: 'rejected', message: err.message || String(err) }));
    done(r);
  } }, icon('stop'), ' Stop session on ' + (machine.info.machine || 'its machine'));
}
