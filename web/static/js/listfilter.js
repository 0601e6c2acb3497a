// The session list's search and filters: words found in a session's first
// prompt, title, folder or machine; its machine; its folder; its state
// (waiting for me, working, finished). What is chosen stays while the page
// lives, so coming back to the list finds it as it was left.

import { h } from './dom.js';
import { shortPath } from './format.js';

// MAX_QUERY is the most characters of a search kept.
export const MAX_QUERY = 200;

/** STATES are the state filters: [value, label]. */
export const STATES = [['', 'All'], ['waiting', 'Waiting for me'], ['working', 'Working'], ['finished', 'Finished']];

const chosen = { q: '', state: '', machine: '', folder: '' };

/** sessionState is what a listed session is doing: waiting, working or finished. */
export function sessionState(s) {
  const info = s.info || {};
  if (info.status === 'waiting-for-permission' || (info.permissions || []).length) return 'waiting';
  if (info.status === 'busy') return 'working';
  return 'finished';
}

/** matches says whether session s passes the filters f ({q, state, machine, folder}). */
export function matches(s, f) {
  const info = s.info || {};
  if (f.state && sessionState(s) !== f.state) return false;
  if (f.machine && (info.machine || '') !== f.machine) return false;
  if (f.folder && (info.cwd || '') !== f.folder) return false;
  const words = String(f.q || '').toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) return true;
  const hay = [info.title, s.prompt, info.cwd, shortPath(info.cwd), info.machine].filter(Boolean).join('\n').toLowerCase();
  return words.every((w) => hay.includes(w));
}

/** listQuery is what is chosen as a list frame's filter (docs/protocol.md), or null. */
export function listQuery() {
  const f = {};
  if (chosen.q.trim()) f.q = chosen.q.trim();
  for (const k of ['state', 'machine', 'folder']) if (chosen[k]) f[k] = chosen[k];
  return Object.keys(f).length ? f : null;
}

/**
 * listFilter is the list's search form. onChange is called when a filter
 * changes; update(sessions) redraws the choices from the sessions listed;
 * filter(sessions) returns those that pass.
 */
export function listFilter(onChange) {
  const search = h('input', { type: 'search', class: 'list-search', placeholder: 'Search prompts, folders, machines', 'aria-label': 'Search sessions', maxlength: MAX_QUERY, autocomplete: 'off', enterkeyhint: 'search' });
  search.value = chosen.q;
  search.addEventListener('input', () => { chosen.q = search.value.slice(0, MAX_QUERY); onChange(); });
  const stateBtns = STATES.map(([value, label]) => h('button', {
    type: 'button', class: 'filter-chip', 'data-state': value, 'aria-pressed': String(chosen.state === value),
    onclick: () => { chosen.state = value; onChange(); },
  }, h('span', { text: label }), h('span', { class: 'count' })));
  const machine = h('select', { 'aria-label': 'Machine', class: 'filter-select' });
  const folder = h('select', { 'aria-label': 'Folder', class: 'filter-select' });
  machine.addEventListener('change', () => { chosen.machine = machine.value; onChange(); });
  folder.addEventListener('change', () => { chosen.folder = folder.value; onChange(); });
  const selects = h('div', { class: 'filter-selects' }, machine, folder);
  const el = h('form', { class: 'list-filter', role: 'search', 'aria-label': 'Find sessions', onsubmit: (e) => { e.preventDefault(); search.blur(); } },
    h('div', { class: 'search-box' }, search),
    h('div', { class: 'filter-chips', role: 'group', 'aria-label': 'State' }, stateBtns),
    selects);

  function options(sel, all, values, name) {
    const key = JSON.stringify(values);
    if (sel.dataset.key !== key) {
      sel.dataset.key = key;
      sel.replaceChildren(h('option', { value: '', text: all }), ...values.map((v) => h('option', { value: v, text: name(v) })));
    }
    sel.hidden = values.length < 2 && !sel.value;
  }

  return {
    el,
    active: () => !!(chosen.q.trim() || chosen.state || chosen.machine || chosen.folder),
    /** query is the filter as a list frame carries it, or null for none. */
    query: () => listQuery(),
    clear() {
      Object.assign(chosen, { q: '', state: '', machine: '', folder: '' });
      search.value = '';
      onChange();
    },
    update(sessions) {
      const count = { '': sessions.length, waiting: 0, working: 0, finished: 0 };
      const machines = new Set();
      const folders = new Set();
      for (const s of sessions) {
        count[sessionState(s)]++;
        if (s.info?.machine) machines.add(s.info.machine);
        if (s.info?.cwd) folders.add(s.info.cwd);
      }
      // A choice no session has any more is still offered, to be undone.
      if (chosen.machine) machines.add(chosen.machine);
      if (chosen.folder) folders.add(chosen.folder);
      options(machine, 'All machines', [...machines].sort(), (v) => v);
      options(folder, 'All folders', [...folders].sort(), shortPath);
      machine.value = chosen.machine;
      folder.value = chosen.folder;
      selects.hidden = machine.hidden && folder.hidden;
      for (const b of stateBtns) {
        b.setAttribute('aria-pressed', String(b.dataset.state === chosen.state));
        b.querySelector('.count').textContent = String(count[b.dataset.state]);
      }
      el.hidden = sessions.length === 0;
    },
    filter: (sessions) => sessions.filter((s) => matches(s, chosen)),
  };
}
