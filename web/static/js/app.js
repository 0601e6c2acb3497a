// ccrelay app: follow and steer Claude Code sessions through the relay.
// Routes: #/ (sessions), #/s/<session id> (one session), #/usage (usage and cost). The relay's token
// arrives once as #token=… (the URL `ccrelay serve` prints), is kept in
// localStorage and removed from the address bar.

import { fill, h, icon, prose } from './dom.js';
import { BUSY_TRIES, Connection, busyDelay, newID, parseTiming } from './conn.js';
import { forgetSession, keepOnly, loadList, loadSession, saveEarlier, saveItems, saveList } from './offline.js';
import { keepCredential, keepPaired, openNotifications, pushDevice, registerWorker } from './notify.js';
import { BadEnvelope, SessionModel } from './model.js';
import { ConversationView, contextCount, contextUse, toolName } from './view.js';
import { ago, baseName, oneLine, shortPath, tokens } from './format.js';
import { permissionExtras, permissionLabels, taskStrip, toolInput } from './tools.js';
import { listFilter, listQuery } from './listfilter.js';
import { outsideProject } from './paths.js';
import { findBar } from './find.js';
import { deviceBar, showPairPage, takePairing } from './pairing.js';
import { signedOut, takeSignedOut } from './forget.js';
import * as e2e from './e2e.js';
import { cleanDaemon, machineOf, machines, newSessionSheet, stopButton } from './machines.js';
import { goneChip, goneState } from './gone.js';
import { usagePage } from './usage.js';

const TOKEN_KEY = 'ccrelay.token';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const MODELS = ['default', 'opus', 'sonnet', 'haiku'];
// The coding agents a session can run, by the info's agent.
const AGENTS = { claude: 'Claude', codex: 'Codex' };
const MODES = [['default', 'Ask before edits'], ['acceptEdits', 'Accept edits'], ['plan', 'Plan only'], ['bypassPermissions', 'Bypass permissions']];

const app = {
  conn: null,
  sessions: new Map(), // id -> summary {id, info, prompt, lastSeq, updated}
  listed: false,
  models: new Map(), // id -> SessionModel (kept while the page lives)
  route: { name: 'list' },
  skipped: [], // what was left out, why
  skippedKeys: new Set(),
  page: null, // the current page's handlers
  renders: 0, // times the page was drawn from the model (a hidden tab draws nothing)
  device: '', // this browser's id for the relay's notifications (made once, kept)
  staleSince: 0, // the list shown is a saved copy from then (ms), until the relay's arrives
  worker: null, // the service worker's registration (a promise)
};
window.ccrelay = app; // for people (and tests) poking at the console

// readTiming reads timing overrides from the URL fragment (…&timing=name:ms,…;
// see TIMING in conn.js), before the token is taken out of it.
function readTiming() {
  const m = /(?:^#|[#&?])timing=([^&]+)/.exec(location.hash);
  return m ? parseTiming(decodeURIComponent(m[1])) : {};
}

// hidden: a hidden tab keeps its model current but draws nothing; it
// draws once when it is visible again (page.onVisible).
const hidden = () => document.visibilityState === 'hidden';

// rendered counts a drawing of the page (app.renders, read by tests).
function rendered() { app.renders++; }

function readToken() {
  const m = /(?:^#|[#&])token=([^&]+)/.exec(location.hash);
  if (m) {
    localStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname + location.search + '#/');
  }
  return localStorage.getItem(TOKEN_KEY);
}

function parseRoute() {
  if (/^#\/usage\/?$/.test(location.hash)) return { name: 'usage' };
  const m = /^#\/s\/([^/?#]+)(?:\?request=([^&#]+))?/.exec(location.hash);
  return m ? { name: 'session', id: decodeURIComponent(m[1]), request: m[2] ? decodeURIComponent(m[2]) : '' } : { name: 'list' };
}

// visibility is what this page shows, for the relay's notifications.
function visibility() {
  const session = app.route.name === 'session' && UUID.test(app.route.id) ? app.route.id : '';
  return { device: app.device, session, visible: !hidden() };
}

const root = document.getElementById('app');

function start() {
  // A pairing link opened in this tab while the app is open (it changes
  // only the fragment, so the page does not load again): start over with it.
  addEventListener('hashchange', () => { if (/(?:^#|[#&])pair=/.test(location.hash)) location.reload(); });
  const out = takeSignedOut();
  if (out) { showTokenPage(out); return; }
  const pair = takePairing();
  if (pair) { showPairPage(root, pair, TOKEN_KEY, () => location.reload()); return; }
  const timing = readTiming();
  const token = readToken();
  app.worker = registerWorker();
  if (!token) { showTokenPage(); return; }
  app.device = pushDevice(newID);
  keepCredential(token);
  keepPaired(e2e.knownMachines().length > 0);
  // This device's key is read (IndexedDB) while the page connects, not when the first session key comes.
  if (e2e.knownMachines().length) e2e.device().catch(() => {});
  // The service worker opens a session when a notification is tapped.
  navigator.serviceWorker?.addEventListener('message', (e) => {
    if (e.data?.type === 'open' && typeof e.data.hash === 'string' && /^#\/s\/[0-9a-f-]{36}(\?request=[^#]*)?$/.test(e.data.hash)) location.hash = e.data.hash;
  });
  // Sealed sessions are opened before the app sees them (e2e.js).
  listing.filter = listQuery();
  app.conn = new Connection(token, { timing, visibility, list: firstPage, open: (f) => e2e.openFrame(f), prepare: (f) => e2e.prepareFrame(f) });
  app.conn.openBlob = (session, id, b64) => e2e.openBlob(session, id, b64);
  e2e.setAsk((session) => app.conn.send({ type: 'session-key', session }));
  // A key that comes after the session was shown without it (this device
  // was trusted while the session runs): the list is asked again, and
  // opens its summary; the session's page, if shown, reads it again.
  e2e.setOnKey((session, late) => {
    if (!late) return;
    app.conn.send(firstPage());
    if (app.route.name === 'session' && app.route.id === session) {
      app.models.delete(session);
      navigate();
    }
  });
  app.conn.addEventListener('frame', (e) => onFrame(e.detail));
  app.conn.addEventListener('bad-frame', (e) => skip(e.detail.why, e.detail.key));
  app.conn.addEventListener('stuck', (e) => app.page?.onStuck?.(e.detail));
  app.conn.addEventListener('state', (e) => {
    // The relay no longer takes this device's credential: it forgets what
    // it kept and says it was signed out (forget.js).
    if (e.detail === 'revoked') { signedOut('revoked'); return; }
    if (e.detail === 'open') {
      e2e.retryKeyless();
      // The key of the session shown is asked with the list, not after it.
      if (app.route?.name === 'session') e2e.prefetchKey(app.route.id);
    }
    document.body.dataset.conn = e.detail;
    app.page?.onConn?.(e.detail);
  });
  addEventListener('hashchange', () => navigate());
  // The visible height (less the on-screen keyboard), for the dock's limit.
  const vv = window.visualViewport;
  if (vv) {
    const setVV = () => document.documentElement.style.setProperty('--vvh', vv.height + 'px');
    vv.addEventListener('resize', setVV);
    setVV();
  }
  document.addEventListener('visibilitychange', () => { if (!hidden()) app.page?.onVisible?.(); });
  navigate();
  app.conn.start();
  // Until the relay lists the sessions, show the list saved last time.
  loadList().then((saved) => {
    if (app.listed || !saved || !Array.isArray(saved.sessions)) return;
    addSessions(saved.sessions);
    app.staleSince = saved.savedAt;
    app.page?.onSessions?.();
  }).catch(() => {});
  setInterval(() => { if (!hidden()) app.page?.tick?.(); }, 30000);
}

function navigate() {
  app.page?.leave?.();
  app.route = parseRoute();
  app.page = app.route.name === 'session' ? sessionPage(app.route.id)
    : app.route.name === 'usage' ? usagePage(root, topBar({ back: true, title: 'Usage and cost', subtitle: 'Last 30 days, counted on this device' }).bar, () => app.sessions)
      : listPage();
  app.page.onConn?.(app.conn.state);
  app.conn.sendVisibility();
}

// The session list comes a page at a time (docs/protocol.md, "A paged
// list"): the newest LIST_PAGE sessions, then the next page as the list's
// end nears. The relay filters by the list's search where it can read a
// summary; a sealed one it cannot read comes anyway and the list's own
// filter judges it once opened.
const LIST_PAGE = 50;
// NEAR_END_PX: the next page is asked when the list's end is this close
// below the screen; SEARCH_SETTLE_MS: a search is sent once typing pauses.
const NEAR_END_PX = 800;
const SEARCH_SETTLE_MS = 250;
// listing is where the list stands: the ref of the list frame awaited, the
// filter it was asked with, where the next page starts ('': no more) and
// whether a page is awaited.
const listing = { n: 0, ref: '', filter: null, next: '', pending: false };

// firstPage is the list frame for the first page (a new ref: an answer to
// an earlier one no longer moves the cursor).
function firstPage() {
  oneAsked.clear();
  listing.ref = 'list-' + ++listing.n;
  listing.next = '';
  listing.pending = true;
  return listFrame('');
}

function listFrame(cursor) {
  const f = { type: 'list', limit: LIST_PAGE, ref: listing.ref };
  if (listing.filter) f.filter = listing.filter;
  if (cursor) f.cursor = cursor;
  return f;
}

// askMore asks for the next page, once.
function askMore() {
  if (!listing.next || listing.pending) return;
  if (app.conn.send(listFrame(listing.next))) listing.pending = true;
}

// askOne asks for one session's summary, once per connection of the
// list; it says whether the answer is still awaited.
const oneAsked = new Map(); // session → 'asked' | 'answered'
function askOne(id) {
  const st = oneAsked.get(id);
  if (st === 'answered') return false;
  if (!st) {
    if (!app.conn.send({ type: 'list', limit: 1, ref: 'one:' + id, filter: { session: id } })) return false;
    oneAsked.set(id, 'asked');
  }
  return true;
}

// listed takes a page of the list (f.next set) or the whole list (a relay
// from before paging).
function listed(f) {
  const paged = typeof f.next === 'string';
  if (typeof f.ref === 'string' && f.ref.startsWith('one:')) oneAsked.set(f.ref.slice(4), 'answered');
  if (!paged) for (const k of oneAsked.keys()) oneAsked.set(k, 'answered');
  const mine = !paged || f.ref === listing.ref;
  const first = !f.cursor;
  // An unfiltered first page is the newest sessions: it replaces the list,
  // and a session kept here that is as recent but not on it was deleted.
  const replaces = mine && first && !(paged && listing.filter);
  const before = replaces ? [...app.sessions.values()] : [];
  if (replaces) app.sessions.clear();
  addSessions(f.sessions || []);
  if (mine) {
    listing.next = paged ? f.next : '';
    listing.pending = false;
    app.listed = true;
    app.staleSince = 0;
  }
  if (!replaces) {
    saveListSoon();
    return;
  }
  saveList([...app.sessions.values()]).catch(() => {});
  if (!paged || !f.next) {
    keepOnly(new Set(app.sessions.keys())).catch(() => {});
    return;
  }
  const times = (f.sessions || []).filter((s) => s && s.info?.mode !== 'machine' && Number.isFinite(s.updated)).map((s) => s.updated);
  const oldest = times.length ? Math.min(...times) : Infinity;
  for (const s of before) if (!app.sessions.has(s.id) && s.updated >= oldest) forgetSession(s.id).catch(() => {});
}

// The session list is saved (for offline reading) at most this often.
const SAVE_LIST_MS = 2000;
let saveListTimer = null;
function saveListSoon() {
  if (saveListTimer) return;
  saveListTimer = setTimeout(() => { saveListTimer = null; saveList([...app.sessions.values()]).catch(() => {}); }, SAVE_LIST_MS);
}

// staleText says since when a saved copy is shown.
function staleText(since) {
  const d = new Date(since);
  const same = d.toDateString() === new Date().toDateString();
  return 'Offline copy — stale since ' + (same ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) : d.toLocaleString([], { dateStyle: 'medium', timeStyle: 'short' })) + '.';
}

// onFrame handles one frame from the relay. A frame it cannot read is
// skipped with a note; the next ones are handled as usual.
function onFrame(f) {
  try {
    switch (f.type) {
      case 'sessions':
        // An empty list comes without its field (omitted when empty).
        if (f.sessions !== undefined && !Array.isArray(f.sessions)) throw new BadEnvelope('a session list that is not a list');
        if (f.next !== undefined && typeof f.next !== 'string') throw new BadEnvelope('a page of the session list without a cursor');
        listed(f);
        app.page?.onSessions?.();
        break;
      case 'e2e-note':
        skip(f.message, 'e2e:' + f.message);
        break;
      case 'session':
        if (!Array.isArray(f.sessions)) throw new BadEnvelope('a session update that is not a list');
        addSessions(f.sessions);
        saveListSoon();
        app.page?.onSessions?.();
        openAwaited();
        break;
      case 'error':
        // The relay refused a plaintext command to a sealed machine.
        if (f.code === 'not-sealed' && machineWaits.has(f.command?.id)) { machineStatus({ command: f.command, status: 'rejected', message: f.message || 'not sealed' }); break; }
        app.page?.onFrame?.(f);
        break;
      case 'command-status':
        machineStatus(f);
        app.page?.onFrame?.(f);
        break;
      default:
        app.page?.onFrame?.(f);
    }
  } catch (e) {
    const why = e instanceof BadEnvelope ? e.message : 'a ' + String(f.type).slice(0, 40) + ' frame it could not show';
    skip(why, why + ':' + safeJSON(f));
    if (!(e instanceof BadEnvelope)) console.error(e);
  }
}

// --- machines (ccrelay daemon) ---------------------------------------------------

// Commands sent to a machine's daemon: command id -> { resolve, timer }.
const machineWaits = new Map();
// How long a start or stop waits for the machine's answer (it waits on the
// relay while the machine is not connected).
const MACHINE_WAIT_MS = 120000;

// sendToMachine sends a command to a daemon (sealed when its session is)
// and resolves with where it ends: { status: 'done' | 'rejected' |
// 'waiting', message }.
function sendToMachine(machineID, cmd) {
  const cid = newID();
  return new Promise((resolve) => {
    // Still queued on the relay: it runs when the machine is back.
    const timer = setTimeout(() => { machineWaits.delete(cid); resolve({ status: 'waiting', message: 'The machine is not connected to the relay. The request waits there and runs when the machine is back (within 24 hours).' }); }, MACHINE_WAIT_MS);
    machineWaits.set(cid, { resolve, timer });
    e2e.sealCommand(machineID, { id: cid, ...cmd }, app.sessions.get(machineID)?.info).then((c) => app.conn.command(machineID, c), (e) => {
      // Never plaintext where the machine seals; a plaintext machine is
      // not sent to from a device paired with machines.
      const message = !(e instanceof e2e.NotSentError) ? 'could not seal it: ' + (e.message || e)
        : e.confirm ? 'Not sent: this machine does not encrypt its sessions end to end, and this device is paired with machines that do. Pair this device with it (run `ccrelay pair` on that machine) to start sessions there.'
          : e.message.replace('this session is end-to-end encrypted and this device has no key for it, so your message', 'this machine is end-to-end encrypted and this device has no key for it, so the request');
      machineStatus({ command: { id: cid }, status: 'rejected', message });
    });
  });
}

function machineStatus(f) {
  const w = machineWaits.get(f.command?.id);
  if (!w || (f.status !== 'done' && f.status !== 'rejected')) return;
  machineWaits.delete(f.command.id);
  clearTimeout(w.timer);
  w.resolve({ status: f.status, message: typeof f.message === 'string' ? f.message.slice(0, 1000) : '' });
}

// openStarted opens a session a daemon started: at once when it is
// listed, else as soon as its ccrelay announces it, under the id its start
// named or, for a new Codex thread (Codex chooses its id), under the id
// the machine's daemon says the start runs as (daemon.threads). What a
// session says of itself (startedAs) is not taken for it, nor what
// another machine's daemon says: only the machine asked knows the start.
let awaited = '';
let awaitedOn = '';
function openStarted(id, machine) {
  awaited = id;
  awaitedOn = machine || '';
  if (!openAwaited()) toast('Starting the session…');
}
function openAwaited() {
  if (!awaited) return false;
  let id = app.sessions.has(awaited) ? awaited : '';
  const m = !id && awaitedOn ? app.sessions.get(awaitedOn) : null;
  if (m && m.info.mode === 'machine') {
    const thread = m.info.daemon?.threads.get(awaited);
    if (thread && app.sessions.has(thread)) id = thread;
  }
  if (!id) return false;
  location.hash = '#/s/' + encodeURIComponent(id);
  awaited = '';
  return true;
}

function addSessions(list) {
  for (const raw of list) {
    if (raw && raw.deleted === true && typeof raw.id === 'string') { sessionDeleted(raw.id); continue; }
    const s = cleanSession(raw);
    if (s) app.sessions.set(s.id, s);
    else skip('a session without a valid id', 'session:' + safeJSON(raw));
  }
}

// sessionDeleted forgets a session deleted on the relay: the list, the
// offline copy, and the page showing it (back to the list).
function sessionDeleted(id) {
  app.sessions.delete(id);
  forgetSession(id).catch(() => {});
  if (app.route.name === 'session' && app.route.id === id) location.hash = '#/';
}

// rateLimitChip shows a rate limit that is near or reached (null when
// there is none to show).
function rateLimitChip(rl) {
  if (!rl || (rl.status !== 'allowed_warning' && rl.status !== 'rejected')) return null;
  const until = rl.resetsAt ? ' until ' + new Date(rl.resetsAt * 1000).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) : '';
  return h('span', { class: 'chip warn rate-limit', text: rl.status === 'rejected' ? 'Rate limited' + until : 'Near the rate limit' });
}

// protectionChip says how a session is protected, for a device paired
// with machines (e2e.protection): encrypted, encrypted without a key here,
// or not encrypted; with machine: which machine sealed it, with its key's
// fingerprint. Null where there is nothing to say (sealed, in the list; a
// device paired with no machine).
function protectionChip(s, { machine = false } = {}) {
  const p = e2e.protection(s.id, s.info || {});
  if (p === 'plain') return h('span', { class: 'chip plain', text: 'Not encrypted', title: 'Not end-to-end encrypted: whoever runs the relay can read this session and what you send to it.' });
  if (p === 'locked') return h('span', { class: 'chip warn', text: 'Encrypted · no key', title: 'End-to-end encrypted; this device has no key for it.' });
  if (p !== 'sealed' || !machine) return null;
  const by = e2e.sealedBy(s.id);
  return h('span', { class: 'chip e2e', text: 'Encrypted', title: 'End-to-end encrypted' + (by ? ' by ' + (by.name || 'a machine this device paired with') + ' (key fingerprint ' + by.fingerprint + ')' : '') });
}

// cleanSession keeps what the app reads of a listed session, each field of
// its documented type (others dropped); null without an id.
function cleanSession(s) {
  if (!s || typeof s !== 'object' || typeof s.id !== 'string' || !s.id) return null;
  const raw = s.info && typeof s.info === 'object' && !Array.isArray(s.info) ? s.info : {};
  const info = {};
  for (const k of ['title', 'cwd', 'machine', 'status', 'mode', 'model', 'permissionMode', 'error']) {
    if (typeof raw[k] === 'string') info[k] = raw[k];
  }
  // The agent the session runs (absent from older machines: Claude Code).
  info.agent = AGENTS[raw.agent] ? raw.agent : 'claude';
  if (typeof raw.agentVersion === 'string') info.agentVersion = raw.agentVersion.slice(0, 64);
  if (Array.isArray(raw.permissions)) info.permissions = raw.permissions.filter((p) => p && typeof p === 'object' && typeof p.id === 'string');
  if (raw.usage && typeof raw.usage === 'object') info.usage = raw.usage;
  // What the running subagents do now (remote mode).
  if (Array.isArray(raw.tasks)) {
    info.tasks = raw.tasks.filter((t) => t && typeof t.subagent === 'string').slice(0, 16).map((t) => ({
      subagent: t.subagent, lastTool: typeof t.lastTool === 'string' ? t.lastTool : '',
      tokens: Number.isFinite(t.tokens) ? t.tokens : 0, toolUses: Number.isFinite(t.toolUses) ? t.toolUses : 0 }));
  }
  // What each of the last turns cost (remote mode): turn id -> US dollars;
  // the list kept on the device holds them as the Map made here.
  const turnCosts = raw.turnCosts instanceof Map ? [...raw.turnCosts].map(([turn, usd]) => ({ turn, usd })) : raw.turnCosts;
  if (Array.isArray(turnCosts)) {
    info.turnCosts = new Map(turnCosts.filter((c) => c && typeof c.turn === 'string' && Number.isFinite(c.usd) && c.usd >= 0).slice(-64).map((c) => [c.turn, c.usd]));
  }
  // The context window's use as Claude counts it (remote mode).
  if (raw.context && Number.isFinite(raw.context.usedTokens) && Number.isFinite(raw.context.maxTokens) && raw.context.maxTokens > 0) {
    info.context = { usedTokens: raw.context.usedTokens, maxTokens: raw.context.maxTokens };
  }
  // The rate limit (remote mode): its status and reset time only.
  if (raw.rateLimit && typeof raw.rateLimit === 'object' && typeof raw.rateLimit.status === 'string') {
    info.rateLimit = { status: raw.rateLimit.status, resetsAt: Number.isFinite(raw.rateLimit.resetsAt) ? raw.rateLimit.resetsAt : 0 };
  }
  // Sealed for other devices: no key here (e2e.openInfo).
  if (raw.locked === true) info.locked = true;
  // End-to-end encrypted (e2e.openInfo): kept in the saved list, so that
  // an offline copy is never taken for a plaintext session.
  if (raw.e2e === true) info.e2e = true;
  // A recording replayed for show (`ccrelay demo`): nothing runs it.
  if (raw.recording === true) info.recording = true;
  // A fork's parent: only a session id (it becomes a link).
  if (typeof raw.forkedFrom === 'string' && /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(raw.forkedFrom)) info.forkedFrom = raw.forkedFrom;
  // A session a machine's daemon started, and a machine (its daemon).
  if (typeof raw.startedBy === 'string' && UUID.test(raw.startedBy)) info.startedBy = raw.startedBy;
  // Nothing can run this session again (a Codex thread Codex never wrote),
  // and the session that took its place, when one did (a link only).
  if (raw.ended === true) info.ended = true;
  if (info.ended && typeof raw.continuedAs === 'string' && UUID.test(raw.continuedAs)) info.continuedAs = raw.continuedAs;
  // The relay's mark: this session's ccrelay (a machine's daemon) left and
  // did not come back; a machine whose daemon is gone runs nothing.
  if (Number.isFinite(raw.cliGone) && raw.cliGone > 0) info.cliGone = raw.cliGone;
  // Its ccrelay closed its connection itself (it stopped), not lost it.
  if (info.cliGone && raw.cliStopped === true) info.cliStopped = true;
  if (info.mode === 'machine') {
    info.daemon = cleanDaemon(raw.daemon);
    if (info.daemon && info.cliGone) { info.daemon.running.clear(); info.daemon.threads.clear(); }
  }
  const num = (v) => (Number.isFinite(v) ? v : 0);
  return { id: s.id, info, prompt: typeof s.prompt === 'string' ? s.prompt : '', lastSeq: num(s.lastSeq), updated: num(s.updated) };
}

// skip tells the reader that something from the relay was left out; key
// names it, so that the same thing sent again (after a reconnection) is
// told once.
function skip(what, key = what) {
  if (app.skippedKeys.has(key)) return;
  app.skippedKeys.add(key);
  app.skipped.push(what);
  app.page?.onSkip?.();
}

function safeJSON(v) {
  try { return String(JSON.stringify(v)).slice(0, 300); } catch { return String(v); }
}

// skipNote is the page's note about what was left out.
function skipNote() {
  const el = h('div', { class: 'skip-note', role: 'status', hidden: true });
  const from = app.skipped.length;
  return {
    el,
    update() {
      const n = app.skipped.length - from;
      if (el.hidden !== (n === 0)) el.hidden = n === 0;
      if (n) el.replaceChildren(...prose((n === 1 ? 'Skipped 1 thing' : `Skipped ${n} things`) + ' from the relay that this app cannot show (last: ' + app.skipped[app.skipped.length - 1] + ').'));
    },
  };
}

// withheldNote is the session page's warning that the relay withheld,
// reordered or replayed sealed envelopes (e2e.js, checkChain).
function withheldNote() {
  const el = h('div', { class: 'skip-note withheld-note', role: 'alert', hidden: true });
  let withheld = 0;
  let other = 0;
  let last = '';
  let tail = null; // {withheld, message}: envelopes withheld at the end (e2e.tailWithheld)
  function render() {
    const parts = [];
    if (withheld) parts.push((withheld === 1 ? '1 envelope was' : `${withheld} envelopes were`) + ' withheld by the relay');
    if (other) parts.push((other === 1 ? '1 envelope came' : `${other} envelopes came`) + ' out of order or again');
    const text = parts.length ? parts.join('; ') + '. ' + (withheld ? 'What is shown is not all of this session.' : last) : '';
    const all = [text, tail ? tail.message : ''].filter(Boolean).join(' ');
    // Only what changed is touched: a hidden page is not drawn (nothing
    // of its DOM changes while it is hidden).
    if (el.textContent !== all) el.textContent = all;
    if (el.hidden !== !all) el.hidden = !all;
  }
  return {
    el,
    add(it) {
      if (it.withheld > 0) withheld += it.withheld;
      else other++;
      last = String(it.unreadable || '').slice(0, 300);
      render();
    },
    /** setTail says (or, with null, no longer says) that envelopes were withheld at the end. */
    setTail(w) {
      tail = w;
      render();
    },
  };
}

// --- the token page ----------------------------------------------------------

// What the token page says of a device that was signed out (forget.js).
const SIGNED_OUT_TEXT = {
  signout: 'This device was signed out. What it kept — its credential, its keys and the sessions it had opened — was deleted from it.',
  revoked: 'This device was signed out: the relay no longer accepts its credential (it was revoked, or signed out elsewhere). What it kept — its credential, its keys and the sessions it had opened — was deleted from it. To use it again, pair it again.',
};

function showTokenPage(signedOutWhy = '') {
  const input = h('input', { type: 'password', placeholder: 'Token or app URL', autocomplete: 'off', 'aria-label': 'Token' });
  const form = h('form', { class: 'token-form', onsubmit: (e) => {
    e.preventDefault();
    const v = input.value.trim();
    if (/#pair=/.test(v)) { location.hash = v.slice(v.indexOf('#')); location.reload(); return; }
    const m = /token=([0-9A-Za-z._~-]+)/.exec(v);
    const t = m ? m[1] : v;
    if (!t) return;
    localStorage.setItem(TOKEN_KEY, t);
    location.hash = '#/';
    location.reload();
  } }, input, h('button', { class: 'primary', type: 'submit', text: 'Connect' }));
  root.replaceChildren(h('main', { class: 'empty-page' },
    h('div', { class: 'logo' }, icon('phone')),
    signedOutWhy ? h('p', { class: 'signed-out', role: 'status', text: SIGNED_OUT_TEXT[signedOutWhy] }) : null,
    h('h1', { text: signedOutWhy ? 'Pair this device again' : 'Connect to your relay' }),
    signedOutWhy ? null : h('p', { class: 'about', text: ABOUT }),
    // A device signed out pairs again: the app link of `ccrelay serve` opens
    // the app only on the relay's own machine.
    h('p', { class: 'next' }, signedOutWhy ? 'Pair it again' : 'Pair this device', ': on your computer, run ', h('code', { class: 'cmd', text: 'ccrelay pair' }), ' and scan its QR code, or paste its link here.',
      signedOutWhy ? null : [' On the relay\'s own machine, the app link ', h('code', { class: 'cmd', text: 'ccrelay serve' }), ' printed works too.']),
    form));
}

// --- the first steps ---------------------------------------------------------

// ABOUT says what ccrelay is, in one line.
const ABOUT = 'ccrelay puts your Claude Code and Codex sessions on this device: follow them and answer them from here.';

// firstSteps says what ccrelay is and what to do next where there is
// nothing to show yet: a device that did not pair is told to pair; a
// paired one, to start a session as it would start Claude.
function firstSteps() {
  const paired = e2e.knownMachines().length > 0;
  const cmd = (text) => h('code', { class: 'cmd', text });
  return h('div', { class: 'first-steps', dataset: { next: paired ? 'start' : 'pair' } },
    h('p', { class: 'empty-hint about', text: ABOUT }),
    paired
      ? h('p', { class: 'empty-hint next' }, 'Next: on your computer, run ', cmd('ccrelay'), ' where you would run ', cmd('claude'), '. The session shows up here.')
      : h('p', { class: 'empty-hint next' }, 'Next: pair this device. On your computer, run ', cmd('ccrelay pair'), ' and scan its QR code.'));
}

// --- the top bar ---------------------------------------------------------------

function topBar({ back, title, subtitle, right = [] }) {
  const titleEl = h('h1', { class: 'top-title', text: title || '' });
  const subEl = h('div', { class: 'top-sub', text: subtitle || '' });
  const dot = h('span', { class: 'conn-dot', title: 'Connection' });
  const bar = h('header', { class: 'top' },
    back ? h('a', { class: 'icon-btn back', href: '#/', 'aria-label': 'All sessions' }, icon('back')) : h('div', { class: 'brand' }, h('span', { class: 'brand-mark' }), 'ccrelay'),
    h('div', { class: 'top-text' }, titleEl, subEl),
    ...right, dot);
  return { bar, titleEl, subEl };
}

// What the banner says in each state of the connection (see conn.js): what
// is wrong, and what to do. A relay that cannot be reached is never
// reported as a refused credential: only the relay's 401 says that.
const CONN_TEXT = {
  connecting: 'Connecting to the relay…',
  reconnecting: 'Offline — reconnecting…',
  offline: 'Offline — the relay cannot be reached from this device. Check this device\'s network, and that `ccrelay serve` is running and reachable from it. Retrying…',
  refused: 'The relay refused this device\'s credential (it is wrong, or was revoked). Pair this device again: on your computer, run `ccrelay pair` and scan its QR code, or paste its link:',
  limited: 'The relay is refusing this address for a while after too many failed logins. Wait a minute; if this device\'s credential is wrong, pair it again: run `ccrelay pair` on your computer.',
  paused: 'Paused while hidden — reconnecting…',
};

function connBanner() {
  const text = h('span');
  const fix = h('button', { class: 'link', type: 'button', text: 'Paste the pairing link', hidden: true, onclick: () => { app.conn?.stop(); showTokenPage(); } });
  const el = h('div', { class: 'conn-banner', role: 'status', hidden: true }, text, ' ', fix);
  return {
    el,
    set(state) {
      el.hidden = state === 'open';
      text.replaceChildren(...prose(CONN_TEXT[state] || CONN_TEXT.reconnecting));
      fix.hidden = state !== 'refused';
      el.dataset.state = state;
    },
  };
}

// --- sessions ------------------------------------------------------------------

// agentTitle says which agent runs the session, at which version.
function agentTitle(info) {
  const name = info.agent === 'codex' ? 'Codex CLI' : 'Claude Code';
  return 'Runs ' + name + (info.agentVersion ? ' ' + info.agentVersion : '') + (info.model ? ', model ' + info.model : '');
}

// agentLabel names a session's agent and, when known, its model
// ("Codex · gpt-5.5").
function agentLabel(info) {
  return [AGENTS[info.agent] || AGENTS.claude, info.model || ''].filter(Boolean).join(' · ');
}

function sessionTitle(s) {
  const info = s.info || {};
  if (info.locked && !info.title) return 'Encrypted session (this device has no key for it)';
  return info.title || s.prompt || baseName(info.cwd) || s.id.slice(0, 8);
}

function listPage() {
  document.title = 'ccrelay';
  const dialog = h('dialog', { class: 'sheet' });
  const bell = h('button', { class: 'icon-btn', type: 'button', 'aria-label': 'Notifications', onclick: () => openNotifications(dialog, { token: app.conn.token, device: app.device }) }, icon('bell'));
  const newBtn = h('button', { class: 'icon-btn new-session-btn', type: 'button', 'aria-label': 'New session', hidden: true,
    onclick: () => newSessionSheet(dialog, { list: machines(app.sessions), models: MODELS, modes: MODES, send: sendToMachine, started: openStarted }) }, icon('plus'));
  const { bar } = topBar({ title: 'Sessions', subtitle: '', right: [newBtn, h('a', { class: 'icon-btn usage-btn', href: '#/usage', 'aria-label': 'Usage and cost' }, icon('chart')), bell] });
  const banner = connBanner();
  const note = skipNote();
  const staleNote = h('div', { class: 'stale-note', role: 'status', hidden: true });
  const list = h('ul', { class: 'sessions', 'aria-label': 'Sessions' });
  // The list's search is served by the relay page by page: a changed
  // search asks for its first page (typing settles first).
  let searchTimer = null;
  const filter = listFilter(() => {
    render();
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      const q = filter.query();
      if (JSON.stringify(q) === JSON.stringify(listing.filter)) return;
      listing.filter = q;
      app.conn.send(firstPage());
    }, SEARCH_SETTLE_MS);
  });
  // The end of the list: when it nears the screen, the next page is asked.
  const moreText = h('span', { role: 'status' });
  const more = h('li', { class: 'more' }, moreText);
  function nearEnd() {
    if (!listing.next || listing.pending || hidden() || !more.isConnected) return;
    if (more.getBoundingClientRect().top < innerHeight + NEAR_END_PX) askMore();
  }
  addEventListener('scroll', nearEnd, { passive: true });
  const main = h('main', { class: 'list-page' }, filter.el, list, deviceBar(app.conn.token));
  root.replaceChildren(bar, banner.el, staleNote, note.el, main, dialog);
  window.scrollTo(0, 0);

  let stale = false;
  function render() {
    if (hidden()) { stale = true; return; }
    stale = false;
    rendered();
    staleNote.hidden = !(app.staleSince && !app.listed);
    if (!staleNote.hidden) staleNote.textContent = staleText(app.staleSince);
    newBtn.hidden = !machines(app.sessions).length;
    const all = [...app.sessions.values()].filter((s) => s.info.mode !== 'machine').sort((a, b) => b.updated - a.updated || (a.id < b.id ? -1 : 1));
    filter.update(all);
    const items = filter.filter(all);
    const paging = !!listing.next || (listing.pending && app.listed);
    moreText.textContent = filter.active() ? 'Searching older sessions…' : 'Loading older sessions…';
    if (all.length && !items.length) {
      list.replaceChildren(paging ? more : h('li', { class: 'empty' },
        h('div', { class: 'empty-title', text: 'No session matches' }),
        h('button', { class: 'link', type: 'button', text: 'Show all sessions', onclick: () => filter.clear() })));
      nearEnd();
      return;
    }
    if (!items.length) {
      list.replaceChildren(h('li', { class: 'empty' },
        h('div', { class: 'empty-title', text: app.listed ? 'No sessions yet' : 'Loading…' }),
        !app.listed ? null : newBtn.hidden ? firstSteps()
          : h('div', { class: 'empty-hint', text: 'Tap + to start a session on ' + machines(app.sessions).map((m) => m.info.machine || 'your machine').join(', ') + '.' })));
      return;
    }
    list.replaceChildren(...items.map((s) => {
      try {
        return sessionRow(s);
      } catch (e) {
        console.error(e);
        skip('a session it could not show', 'session:' + s.id);
        return null;
      }
    }).filter(Boolean));
    if (paging) list.append(more);
    nearEnd();
  }
  function sessionRow(s) {
      const info = s.info || {};
      const status = info.status || 'idle';
      const waiting = (info.permissions || []).length;
      return h('li', { class: 'session-row', 'data-session': s.id },
        h('a', { href: '#/s/' + encodeURIComponent(s.id) },
          h('div', { class: 'row-main' },
            h('div', { class: 'row-title', text: oneLine(sessionTitle(s), 140) }),
            h('div', { class: 'row-meta' },
              info.cwd ? h('span', { class: 'cwd', text: shortPath(info.cwd) }) : null,
              info.machine ? h('span', { text: info.machine }) : null,
              info.mode === 'machine' ? null : h('span', { class: 'agent agent-' + (info.agent || 'claude'), text: agentLabel(info), title: agentTitle(info) }))),
          h('div', { class: 'row-side' },
            h('span', { class: 'time', text: ago(s.updated) }),
            h('span', { class: 'chips' },
              waiting ? h('span', { class: 'chip warn', text: waiting + ' waiting' }) : null,
              // The relay found no ccrelay holding it (its machine gone, or ccrelay stopped).
              goneChip(info),
              protectionChip(s),
              info.recording ? h('span', { class: 'chip recording', text: 'Recording' }) : null,
              info.mode ? h('span', { class: 'chip mode-' + info.mode, text: info.mode }) : null,
              h('span', { class: 'status-dot ' + (goneState(info) ? 'gone' : status), title: goneState(info)?.text || status })))));
  }
  render();
  return {
    onSessions: render, tick: render, onConn: (s) => banner.set(s), onSkip: note.update, onVisible: () => { if (stale) render(); },
    leave() {
      clearTimeout(searchTimer);
      removeEventListener('scroll', nearEnd);
    },
  };
}

// --- one session -----------------------------------------------------------------

// A session longer than 1.5 × TAIL opens on its last TAIL envelopes, its
// last screenfuls: sealed or not, the end is drawn after reading (and, if
// sealed, opening) those only, and the earlier part follows in the
// background on a connection of its own (a 10,000-envelope session is
// ~9 MB).
const TAIL = 200;

function sessionPage(id) {
  let model = app.models.get(id);
  if (!model) { model = new SessionModel(id); app.models.set(id, model); }
  let fetchingEarlier = false;
  let earlierWS = null;
  let left = false;
  const summary = () => app.sessions.get(id) || { id, info: {} };
  const info = () => summary().info || {};

  const meter = h('div', { class: 'meter', title: 'Context in use', hidden: true }, h('div', { class: 'meter-bar' }, h('span')), h('span', { class: 'meter-label' }));
  const menuBtn = h('button', { class: 'icon-btn', type: 'button', 'aria-label': 'Session settings', onclick: () => openSettings() }, icon('dots'));
  const finder = findBar(() => ({ model, view, root: conv }));
  const findBtn = h('button', { class: 'icon-btn', type: 'button', 'aria-label': 'Find in session', onclick: () => finder.open() }, icon('search'));
  // The context meter stands in the subtitle: the title takes the bar's width.
  const top = topBar({ back: true, title: 'Session', subtitle: '', right: [findBtn, menuBtn] });
  top.bar.classList.add('session-top');
  const banner = connBanner();
  const note = skipNote();
  const chainNote = withheldNote();
  const loading = h('div', { class: 'loading' }, h('span', { class: 'spinner' }), h('span', { class: 'loading-text', text: 'Loading session…' }));
  const conv = h('div', { class: 'conv', 'aria-live': 'polite' });
  const pending = h('div', { class: 'pending' });
  const tasks = taskStrip();
  const main = h('main', { class: 'session-page' }, tasks.el, loading, conv, pending);
  const newPill = h('button', { class: 'new-pill', type: 'button', hidden: true, onclick: () => scrollToEnd(true) }, icon('down'), 'New messages');

  // The dock: permission requests, then the composer.
  const perms = h('div', { class: 'perms' });
  const input = h('textarea', { rows: 1, placeholder: 'Message Claude…', 'aria-label': 'Prompt', enterkeyhint: 'send' });
  const sendBtn = h('button', { class: 'send', type: 'submit', 'aria-label': 'Send', disabled: true }, icon('send'));
  const stopBtn = h('button', { class: 'stop', type: 'button', 'aria-label': 'Interrupt', hidden: true, onclick: () => command({ kind: 'abort' }, 'Interrupt') }, icon('stop'));
  const hint = h('div', { class: 'composer-hint' });
  const form = h('form', { class: 'composer', onsubmit: (e) => { e.preventDefault(); sendPrompt(); } }, input, stopBtn, sendBtn);
  // Why a command was not sent (no key for a sealed session, a plaintext
  // session to confirm): said in the composer, which keeps the text.
  const sealNote = h('div', { class: 'seal-note', id: 'seal-note', role: 'alert', hidden: true });
  // Said of an offline copy, where the eye is when the session opens (at its end).
  const staleNote = h('div', { class: 'stale-note', role: 'status', hidden: true });
  const dock = h('section', { class: 'dock', 'aria-label': 'Requests and prompt' }, newPill, perms, staleNote, sealNote, form, hint);
  const dialog = h('dialog', { class: 'sheet' });
  // Said when the relay answers but no CLI is connected for this session.
  const machine = h('div', { class: 'machine-note', role: 'status', hidden: true });
  // Said of a recording (the demo's session): nothing runs it.
  const recordingNote = h('div', { class: 'recording-note', role: 'note', hidden: true,
    text: 'A recording: this session was recorded from Claude Code and is replayed here for show. Nothing runs it.' });
  main.prepend(recordingNote);
  // A fork's parent, at the top of the conversation (a link as tall as a
  // thumb: the top bar's line below the title is too short for one).
  const forkNote = h('div', { class: 'fork-note', hidden: true });
  tasks.el.after(forkNote);
  root.replaceChildren(top.bar, finder.el, banner.el, machine, note.el, chainNote.el, main, dock, dialog);
  window.scrollTo(0, 0);

  input.addEventListener('input', () => { autosize(); sendBtn.disabled = !input.value.trim(); });
  input.addEventListener('keydown', (e) => {
    // Enter sends on a keyboard with a pointer; on phones Enter is a newline.
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && matchMedia('(pointer: fine)').matches) { e.preventDefault(); sendPrompt(); }
  });
  function autosize() { input.style.height = 'auto'; input.style.height = Math.min(input.scrollHeight, 180, (visualViewport?.height || innerHeight) / 4) + 'px'; }

  // The dock's height is the space the conversation leaves at its end; a
  // reader at the end stays there when it grows (a request, a note).
  const ro = new ResizeObserver(() => {
    document.documentElement.style.setProperty('--dock-h', dock.offsetHeight + 'px');
    // A request card fits in what the dock leaves it (at most half the
    // visible height, less the prompt box): its answers stay in view.
    const vh = visualViewport?.height || innerHeight;
    perms.style.setProperty('--perm-max', Math.max(120, Math.floor(vh / 2 - (dock.offsetHeight - perms.offsetHeight) - 8)) + 'px');
    if (stick && view) scrollToEnd();
  });
  ro.observe(dock);

  let view = null;
  const pendings = new Map(); // command id -> {el, text, kind}
  let userBlocks = model.prompts.length;

  function atEnd() {
    const s = document.scrollingElement;
    return s.scrollHeight - s.scrollTop - s.clientHeight < 120;
  }
  function scrollToEnd(smooth = false) {
    newPill.hidden = true;
    const s = document.scrollingElement;
    s.scrollTo({ top: s.scrollHeight, behavior: smooth ? 'smooth' : 'auto' });
  }
  let stick = true; // follow the end while the reader is there
  addEventListener('scroll', onScroll, { passive: true });
  function onScroll() {
    stick = atEnd();
    if (stick) newPill.hidden = true;
  }

  // A hidden tab applies envelopes to the model and draws nothing: stale
  // says the page is behind the model, redrawn once when visible.
  let stale = false;
  let caughtUp = false;

  function showView() {
    if (view) return;
    if (hidden()) { stale = true; return; }
    rendered();
    loading.hidden = true;
    view = new ConversationView(model, conv, viewOpts());
    scrollToEnd();
    // Layout can settle after fonts and the dock: stay at the end.
    requestAnimationFrame(() => scrollToEnd());
    document.body.dataset.rendered = id;
    performance.mark('ccrelay:session-rendered');
    // The first frame with the session on screen.
    requestAnimationFrame(() => setTimeout(() => {
      performance.mark('ccrelay:session-painted');
      document.body.dataset.painted = id;
      if (model.first > 0) loadEarlier();
    }, 0));
  }

  function viewOpts(minBlocks = 0) {
    return { onGrow: () => { if (stick) scrollToEnd(); }, live: () => !!info().mode, loadEarlier, minBlocks,
      // A running subagent of a remote session can be stopped alone.
      stopSub: (sub, btn) => command({ kind: 'stop-task', subagent: sub }, 'Stop subagent', () => { btn.disabled = false; }),
      // What a turn cost, when Claude said (remote mode).
      turnCost: (turn) => info().turnCosts?.get(turn),
      // What the relay keeps beside an envelope: a full tool result, a prompt's image.
      fetchBlob: (envID) => app.conn.fetchBlob(id, envID) };
  }

  // loadEarlier fetches, on a socket of its own, the envelopes before the
  // tail shown, then rebuilds the model and the view where the reader is.
  function loadEarlier() {
    if (!(model.first > 0) || fetchingEarlier) return;
    fetchingEarlier = true;
    const until = model.first;
    const earlier = [];
    let finished = false;
    let earlierInbox = Promise.resolve(); // sealed batches opened in order
    const chain = e2e.earlierChain(until); // their sealed chain, checked apart and where it meets the tail
    const breaks = []; // where it broke, said once the part is read
    const ws = new WebSocket(app.conn.url, ['ccrelay-token.' + app.conn.token]);
    earlierWS = ws;
    const done = () => {
      finished = true;
      ws.close();
      const brk = e2e.joinChain(id, chain);
      if (brk) breaks.push({ seq: until + 1, chainBreak: true, withheld: brk.withheld, unreadable: brk.message });
      for (const it of breaks) chainNote.add(it);
      const s = document.scrollingElement;
      const fromBottom = s.scrollHeight - s.scrollTop;
      const shown = view ? model.blocks.length - view.from : 0;
      // Kept for offline reading (and the usage page) with the end.
      saveEarlier(id, earlier);
      model = model.withEarlier(earlier);
      app.models.set(id, model);
      userBlocks = model.prompts.length;
      if (view) {
        view.destroy();
        view = new ConversationView(model, conv, viewOpts(shown + 1));
        s.scrollTop = s.scrollHeight - fromBottom;
      }
      fetchingEarlier = false;
      renderHeader();
      document.body.dataset.earlier = id;
    };
    // Only up to the end shown (a relay that does not know before sends
    // more, which is left unread).
    const ask = () => ws.send(JSON.stringify({ v: 1, type: 'subscribe', session: id, after: 0, before: until + 1 }));
    ws.onopen = ask;
    let busyTries = 0;
    ws.onmessage = (e) => {
      if (finished || left) return;
      let f;
      try { f = JSON.parse(e.data); } catch { return; } // said by the main connection
      if (!f || typeof f !== 'object') return;
      // The relay has too many reads under way: asked again after a
      // backoff, on a fresh socket after BUSY_TRIES (onclose).
      if (f.type === 'error' && f.code === 'busy') {
        if (++busyTries > BUSY_TRIES) ws.close();
        else setTimeout(() => { if (!finished && !left && ws.readyState === WebSocket.OPEN) ask(); }, busyDelay(busyTries - 1, app.conn.timing));
        return;
      }
      e2e.prepareFrame(f);
      earlierInbox = earlierInbox.then(() => e2e.openFrame(f, chain)).then((g) => {
        if (finished || left || !g) return;
        if (g.type === 'batch' && Array.isArray(g.items)) {
          for (const it of g.items) {
            if (!it || typeof it !== 'object' || !Number.isFinite(it.seq)) continue;
            // What the earlier part could not show is said as the end's is.
            if (it.chainBreak && it.seq <= until) breaks.push(it);
            else if (it.unreadable && it.seq <= until) skip(it.unreadable, 'envelope:' + id + ':' + it.seq);
            if (it.unreadable) continue;
            if (it.seq > until) { done(); return; }
            earlier.push([it.seq, it.envelope]);
          }
          if (earlier.length && earlier[earlier.length - 1][0] === until) done();
        } else if (g.type === 'caught-up') done();
      });
    };
    ws.onclose = () => {
      if (!finished && !left) { fetchingEarlier = false; setTimeout(loadEarlier, 2000); }
    };
  }

  function renderHeader() {
    if (hidden()) { stale = true; return; }
    rendered();
    const s = summary();
    const i = info();
    top.titleEl.textContent = oneLine(sessionTitle(s), 80);
    document.title = oneLine(sessionTitle(s), 40) + ' · ccrelay';
    const bits = [i.cwd ? shortPath(i.cwd) : '', i.machine || ''].filter(Boolean);
    recordingNote.hidden = !i.recording;
    const parent = i.forkedFrom ? app.sessions.get(i.forkedFrom) : null;
    forkNote.hidden = !i.forkedFrom;
    const forkText = i.forkedFrom ? 'forked from ' + oneLine(parent ? sessionTitle(parent) : i.forkedFrom.slice(0, 8), 60) : '';
    if (forkNote.textContent !== forkText) {
      fill(forkNote, i.forkedFrom ? h('a', { class: 'fork-link', href: '#/s/' + encodeURIComponent(i.forkedFrom), text: forkText }) : null);
    }
    const gone = machineGone(i);
    machineText();
    fill(top.subEl,
      h('span', { class: 'status-dot ' + (gone ? 'gone' : i.status || 'idle') }),
      h('span', { class: 'status-text', text: statusText(i) }),
      meter,
      rateLimitChip(i.rateLimit),
      protectionChip(s, { machine: true }),
      h('span', { class: 'dim agent agent-' + (i.agent || 'claude'), text: ' · ' + agentLabel(i), title: agentTitle(i) }),
      bits.length ? h('span', { class: 'dim', text: ' · ' + bits.join(' · ') }) : null);
    const use = i.context ? contextCount(i.context, AGENTS[i.agent] || AGENTS.claude) : contextUse(i.usage || model.usage);
    meter.hidden = !use || use.used === 0;
    if (use) {
      meter.querySelector('.meter-bar span').style.width = use.pct.toFixed(1) + '%';
      meter.dataset.level = use.pct > 85 ? 'high' : use.pct > 60 ? 'mid' : 'low';
      // Tiny usage is not "0%".
      meter.querySelector('.meter-label').textContent = use.pct < 1 ? '<1%' : Math.round(use.pct) + '%';
      meter.title = 'Context in use: ' + use.label;
    }
    const remote = i.mode === 'remote';
    main.dataset.mode = i.mode || ''; // what the stylesheet shows (a subagent's Stop)
    for (const el of conv.querySelectorAll('details.sub > .progress')) el.textContent = '';
    for (const t of i.tasks || []) {
      const el = conv.querySelector('details.sub[data-sub="' + CSS.escape(t.subagent) + '"] > .progress');
      if (el) el.textContent = [t.lastTool, t.toolUses ? t.toolUses + (t.toolUses === 1 ? ' tool' : ' tools') : '', t.tokens ? tokens(t.tokens) + ' tokens' : ''].filter(Boolean).join(' · ');
    }
    // A recording (no machine ever announced it) cannot take prompts, nor
    // can a session of plain claude that ccrelay only follows.
    const recording = app.listed && !i.mode;
    const followed = i.mode === 'followed';
    // Nor can a session that cannot go on (it ended).
    const ended = !!i.ended && !recording;
    input.disabled = recording || followed || ended;
    // Offline, a prompt waits in this page and is sent when the relay is back.
    input.placeholder = recording ? 'A recording: it takes no prompts' : followed ? 'Read-only: started with plain claude'
      : ended ? 'This session cannot go on: it takes no prompts'
      : app.conn.state !== 'open' ? 'Offline: sent when back online' : 'Message ' + (AGENTS[i.agent] || AGENTS.claude) + '…';
    if (recording || followed || ended) sendBtn.disabled = true;
    const busy = i.status === 'busy' || i.status === 'waiting-for-permission';
    stopBtn.hidden = !(remote && busy);
    // Codex's terminal takes nothing from the app (docs/compatibility.md,
    // terminal → phone): no hand-over is offered.
    // An ended session says why and links the session it goes on in.
    const next = ended && i.continuedAs ? [' ', h('a', { class: 'continued-link', href: '#/s/' + encodeURIComponent(i.continuedAs), text: 'Open the session it goes on in' })] : null;
    fill(hint, ended ? ['⚠ ', prose(i.error || goneState(i)?.note || ''), next] : i.error ? ['⚠ ', prose(i.error)] : remote ? '' : i.mode === 'local' && !gone
      ? (i.agent === 'codex' ? 'This Codex session runs in its terminal, which takes nothing from the app: answer Codex there.' : 'Sending a message moves this session from the terminal to your phone.')
      : followed ? 'Read-only: steering it needs ccrelay (ccrelay --resume ' + id + ' in its folder).' : '');
    hint.classList.toggle('error', !!i.error || ended);
    renderPerms(i.permissions || []);
    tasks.update(model);
    view?.refreshOpenTurn();
  }

  // machineGone: no ccrelay holds the session, as the relay marked it or
  // answered when asked (the note below the top bar says so too).
  const machineGone = (i) => !i.recording && !!i.mode && (!!i.cliGone || !machine.hidden);
  function statusText(i) {
    if (i.recording) return 'Recording';
    if (i.ended) return goneState(i)?.text || 'Cannot go on';
    if (machineGone(i)) return goneState(i, true)?.text || 'Machine offline';
    if (i.status === 'waiting-for-permission') return 'Waiting for you';
    if (i.status === 'busy') return 'Working';
    if (i.mode === 'remote') return 'Remote · idle';
    if (i.mode === 'local') return 'In the terminal';
    if (i.mode === 'followed') return 'Followed (read-only)';
    return 'Recorded';
  }

  const answered = new Set(); // permission ids answered here, hidden until the CLI confirms
  const permCards = new Map(); // request id -> {key, el}: kept while unchanged (a reason being typed stays)
  function renderPerms(list) {
    const open = list.filter((p) => !answered.has(p.id));
    const cards = open.map((p) => {
      const key = JSON.stringify(p) + '|' + !!(p.call && model.calls.get(p.call));
      const was = permCards.get(p.id);
      if (was && was.key === key) return [p.id, was];
      return [p.id, { key, el: permCard(p) }];
    });
    permCards.clear();
    for (const [pid, c] of cards) permCards.set(pid, c);
    const els = cards.map(([, c]) => c.el);
    if (els.length !== perms.children.length || els.some((el, i) => perms.children[i] !== el)) perms.replaceChildren(...els);
    // Opened from a notification: the request it named, in view.
    const want = app.route.request && permCards.get(app.route.request);
    if (want && !want.el.classList.contains('focus')) { want.el.classList.add('focus'); want.el.scrollIntoView({ block: 'nearest' }); }
  }
  function permCard(p) {
    // The request names its tool call, whose start holds the whole input
    // (the list's summary may cut it).
    const call = p.call ? model.calls.get(p.call) : null;
    const inp = call?.args && typeof call.args === 'object' ? call.args : p.input && typeof p.input === 'object' ? p.input : {};
    const labels = permissionLabels(p.tool);
    // An edit allows what it sends: only of an input known whole (not
    // clipped by the CLI; the call's args, unless the mapper cut them, or
    // the request's input, unless the list's summary cut it).
    // Codex takes no edited input (it runs what it asked for): none is
    // offered.
    const editable = info().agent !== 'codex' && p.clipped !== true && (call?.args && typeof call.args === 'object' ? !call.args.ccrelayCut : p.inputCut !== true);
    const answer = (allow, forSession, input, reason) => {
      answered.add(p.id);
      const cmd = allow ? { kind: 'permission', requestId: p.id, allow: true, forSession: !!forSession } : { kind: 'permission', requestId: p.id, allow: false, reason: reason || 'Denied from the ccrelay app' };
      if (input) cmd.input = input;
      command(cmd, allow ? labels.allow : labels.deny, () => answered.delete(p.id));
      renderHeader();
    };
    const detail = toolInput(p.tool, inp, { model, answer: p.tool === 'AskUserQuestion' ? (input) => answer(true, false, input) : null }, call);
    const sub = p.subagent ? model.subs.get(p.subagent) : null;
    // The request's description is often the tool input's own (a command's
    // description), which the input's card shows already: said once.
    const desc = typeof p.description === 'string' ? p.description.trim() : '';
    const saysDesc = desc && !(detail?.textContent || '').includes(desc);
    // Claude Code names the path a request is about; only one outside the
    // session's folder is said to be outside the project.
    const outside = p.blockedPath && outsideProject(p.blockedPath, info().cwd);
    // The card's head and its answers stay in view; what lies between
    // (the input, the other ways to answer) scrolls inside it when the
    // dock is short (the on-screen keyboard open).
    const body = h('div', { class: 'perm-body' },
      saysDesc ? h('div', { class: 'perm-desc', text: desc }) : null,
      detail,
      outside ? h('div', { class: 'meta perm-outside', text: 'Outside the project: ' + p.blockedPath }) : null,
      // A request too long to announce whole is shown in part: said, and
      // not editable (Allow and Deny answer what was asked).
      p.clipped === true ? h('div', { class: 'meta perm-clipped', text: 'Too long to show whole: part of it is shown. Allow and Deny answer all of it.' }) : null,
      permissionExtras(p.tool, inp, { allow: (input) => answer(true, false, input), deny: (reason) => answer(false, false, null, reason), clipped: !editable, agent: info().agent, reasonRead: p.reasonRead === true }));
    const card = h('div', { class: 'perm', 'data-request': p.id },
      h('div', { class: 'perm-head' }, icon('shield'), labels.verb ? h('span', { text: labels.verb + '?' }) : h('span', null, 'Allow ', h('b', { text: toolName(p.tool) }), '?'),
        sub || p.subagent ? h('span', { class: 'chip', text: sub?.title || 'subagent' }) : null),
      body,
      h('div', { class: 'perm-actions' },
        h('button', { class: 'deny', type: 'button', text: labels.deny, onclick: () => answer(false) }),
        (p.forSession || []).length ? h('button', { class: 'session', type: 'button', title: 'Adds the rule ' + p.forSession.join(', '), onclick: () => answer(true, true) }, 'Allow for this session', h('span', { class: 'rule', text: p.forSession.join(', ') })) : null,
        h('button', { class: 'allow primary', type: 'button', text: labels.allow, onclick: () => answer(true) })));
    // A body that scrolls says so (data-more: the stylesheet fades its
    // edge) until it is scrolled to its end.
    const more = () => {
      const m = String(body.scrollHeight - body.scrollTop - body.clientHeight > 2);
      if (card.dataset.more !== m) card.dataset.more = m;
    };
    body.addEventListener('scroll', more, { passive: true });
    const ro = new ResizeObserver(more);
    ro.observe(body);
    for (const c of body.children) ro.observe(c);
    return card;
  }

  function sendPrompt() {
    const text = input.value.trim();
    if (!text) return;
    hideNotSent();
    input.value = '';
    autosize();
    sendBtn.disabled = true;
    const el = h('div', { class: 'msg user pending-msg' }, h('div', { class: 'bubble', text }), h('div', { class: 'pending-status', text: 'Sending…' }));
    pending.append(el);
    const cid = command({ kind: 'prompt', text }, 'Prompt', null, el);
    pendings.set(cid, { el, text });
    scrollToEnd(true);
  }

  // command sends a command; rejections show, with the relay's reason.
  const commandTitles = new Map();
  // A sealed session's commands are sealed first, in the order sent.
  let sending = Promise.resolve();
  function command(cmd, title, onReject, el) {
    const cid = newID();
    commandTitles.set(cid, { title, onReject, el, cmd });
    sending = sending.then(() => e2e.sealCommand(id, { id: cid, ...cmd }, info())).then((c) => app.conn.command(id, c), (e) => {
      if (e instanceof e2e.NotSentError) { notSent(cid, e.message, e.confirm); return; }
      onCommandStatus({ command: { id: cid }, status: 'rejected', message: 'could not seal it: ' + (e.message || e) });
    });
    return cid;
  }

  // notSent handles a command that was not sent (this device would not
  // send it, or the relay refused it unsealed): a prompt's text goes back
  // into the composer, and the composer says why and what to do; where
  // the person may choose to send unencrypted, it offers that.
  function notSent(cid, message, confirm) {
    const c = commandTitles.get(cid);
    commandTitles.delete(cid);
    const p = pendings.get(cid);
    pendings.delete(cid);
    if (p) {
      p.el.remove();
      const now = input.value.trim();
      if (!now) input.value = p.text;
      else if (!now.includes(p.text)) input.value = p.text + '\n' + input.value;
      autosize();
      sendBtn.disabled = input.disabled || !input.value.trim();
    }
    c?.onReject?.();
    const retry = !confirm ? null : p ? () => sendPrompt() : c ? () => command(c.cmd, c.title, c.onReject, c.el) : null;
    showNotSent(message, retry);
    renderHeader();
  }
  function showNotSent(message, retry) {
    sealNote.replaceChildren(h('span', { class: 'seal-note-text' }, prose(message)),
      retry ? h('button', { class: 'link send-plain', type: 'button', text: 'Send unencrypted', onclick: () => { e2e.allowPlaintext(id); hideNotSent(); retry(); } }) : null,
      h('button', { class: 'link', type: 'button', text: 'Dismiss', onclick: () => { hideNotSent(); input.focus(); } }));
    sealNote.hidden = false;
    input.setAttribute('aria-describedby', 'seal-note');
  }
  function hideNotSent() {
    sealNote.hidden = true;
    sealNote.replaceChildren();
    input.removeAttribute('aria-describedby');
  }

  function onCommandStatus(f) {
    const c = commandTitles.get(f.command?.id);
    if (!c) return;
    if (c.el) {
      const label = { queued: 'No machine is connected to this session; your prompt waits for it', delivered: 'Delivered', done: 'Sent', rejected: 'Not sent: ' + (f.message || 'rejected') }[f.status] || f.status;
      c.el.querySelector('.pending-status').textContent = label;
      c.el.dataset.status = f.status;
      if (f.status === 'rejected' && !c.el.querySelector('button.link')) {
        c.el.append(h('button', { class: 'link', type: 'button', text: 'Dismiss', onclick: () => { c.el.remove(); pendings.delete(f.command.id); } }));
      }
    }
    if (f.status === 'rejected') {
      c.onReject?.();
      if (!c.el) toast(c.title + ': ' + (f.message || 'rejected'), 'error');
      renderHeader();
    }
    if (f.status === 'done' || f.status === 'rejected') commandTitles.delete(f.command.id);
  }

  // A prompt shown as pending goes away when the session shows it.
  function settlePending() {
    while (userBlocks < model.prompts.length) {
      const text = model.prompts[userBlocks++];
      for (const [cid, p] of pendings) {
        if (p.text.trim() === text.trim()) { p.el.remove(); pendings.delete(cid); break; }
      }
    }
  }

  // protectionLine says in the settings how the session is protected:
  // which machine sealed it, and that machine's key fingerprint.
  function protectionLine() {
    const p = e2e.protection(id, info());
    const by = p === 'sealed' ? e2e.sealedBy(id) : null;
    const text = {
      sealed: 'End-to-end encrypted' + (by ? ' by ' + (by.name || 'a machine this device paired with') + ' · key fingerprint ' + by.fingerprint : ''),
      locked: 'End-to-end encrypted; this device has no key for it.',
      plain: 'Not end-to-end encrypted: the relay can read it.',
    }[p];
    return text ? h('div', { class: 'meta protection', text }) : null;
  }

  function openSettings() {
    const i = info();
    const remote = i.mode === 'remote';
    const model_ = h('select', { 'aria-label': 'Model', disabled: !remote, onchange: () => command({ kind: 'model', model: model_.value === 'default' ? '' : model_.value }, 'Model') },
      [...new Set([...(i.model && !MODELS.includes(i.model) ? [i.model] : []), ...MODELS])].map((m) => h('option', { value: m, text: m, selected: (i.model || 'default') === m })));
    const mode = h('select', { 'aria-label': 'Permission mode', disabled: !remote, onchange: () => command({ kind: 'permission-mode', mode: mode.value }, 'Permission mode') },
      MODES.map(([v, label]) => h('option', { value: v, text: label, selected: (i.permissionMode || 'default') === v })));
    dialog.replaceChildren(h('form', { method: 'dialog', class: 'sheet-body' },
      h('div', { class: 'sheet-title', text: 'Session' }),
      h('label', { class: 'field' }, h('span', { text: 'Model' }), model_),
      h('label', { class: 'field' }, h('span', { text: 'Permission mode' }), mode),
      remote ? null : h('p', { class: 'meta', text: i.mode === 'followed' ? 'This session runs in plain claude, which ccrelay only follows: nothing of it can be changed from here. Run it with ccrelay to steer it.' : 'Model and permission mode can be changed while the session runs from here (remote mode). Send a message to take it over.' }),
      remote ? h('button', { class: 'wide', type: 'button', onclick: () => { command({ kind: 'switch', mode: 'local' }, 'Back to the terminal'); dialog.close(); } }, icon('terminal'), ' Hand back to the terminal') : null,
      h('div', { class: 'meta mono', text: 'Session ' + id }),
      protectionLine(),
      // The daemon runs a new Codex thread under the thread's id too.
      stopButton(machineOf(app.sessions, summary()), id, sendToMachine, (r) => {
        dialog.close();
        if (r.status === 'rejected') toast('Stop: ' + (r.message || 'refused'), 'error');
        else if (r.status === 'waiting') toast(r.message);
        else toast('Session stopped');
      }),
      h('button', { class: 'wide danger', type: 'button', onclick: () => removeSession() }, 'Delete session'),
      h('button', { class: 'wide primary', value: 'close', text: 'Done' })));
    dialog.showModal();
  }

  // removeSession deletes the session on the relay, once confirmed: its
  // envelopes and commands are gone for good, from every device.
  async function removeSession() {
    if (!confirm('Delete this session? Its messages are removed from the relay and every device, for good.')) return;
    const code = await app.conn.deleteSession(id);
    if (code === 204 || code === 404) {
      dialog.close();
      sessionDeleted(id);
      return;
    }
    alert(code ? 'The relay did not delete the session (' + code + ').' : 'The relay did not answer; the session was not deleted.');
  }

  function onFrame(f) {
    if (f.type === 'command-status') { onCommandStatus(f); return; }
    if (f.session !== id) return;
    if (f.type === 'batch') {
      if (!Array.isArray(f.items)) throw new BadEnvelope('a batch without items');
      if (!model.batches++) performance.mark('ccrelay:first-batch');
      saveItems(id, summary(), f.items); // read here: kept for offline reading
      let changed = false;
      const wasEnd = stick;
      for (const it of f.items) {
        // Each envelope on its own: one that cannot be shown is skipped,
        // the others are.
        try {
          if (!it || typeof it !== 'object' || !Number.isFinite(it.seq)) throw new BadEnvelope('a batch item without a sequence number');
          if (it.chainBreak) { chainNote.add(it); continue; }
          if (it.unreadable) { model.lastSeq = Math.max(model.lastSeq, it.seq); throw new BadEnvelope(it.unreadable); }
          const ch = model.apply(it.seq, it.envelope);
          if (ch && view && ch.length) {
            if (hidden()) stale = true;
            else { view.apply(ch); changed = true; }
          }
        } catch (e) {
          if (!(e instanceof BadEnvelope)) console.error(e);
          skip(e instanceof BadEnvelope ? e.message : 'an envelope it could not show', 'envelope:' + id + ':' + (it && it.seq));
        }
      }
      if (caughtUp) checkTail();
      if (view && changed) {
        rendered();
        settlePending();
        renderHeader();
        if (wasEnd) scrollToEnd(); else newPill.hidden = false;
      } else if (!view && !hidden()) {
        const total = summary().lastSeq;
        loading.querySelector('.loading-text').textContent = total ? `Loading ${model.lastSeq.toLocaleString()} of ${total.toLocaleString()}…` : 'Loading session…';
      }
    } else if (f.type === 'caught-up') {
      performance.mark('ccrelay:caught-up');
      caughtUp = true;
      checkTail();
      staleNote.hidden = true;
      showView();
      settlePending();
      renderHeader();
    } else if (f.type === 'live') {
      if (hidden()) return; // a typing preview: the envelopes follow
      view?.delta(f.payload);
      if (stick) scrollToEnd();
    } else if (f.type === 'error') {
      if (f.code === 'not-sealed' && f.session === id && typeof f.command?.id === 'string') notSent(f.command.id, typeof f.message === 'string' ? f.message.slice(0, 1000) : 'Not sent: the relay takes only sealed commands for this session.', false);
      else if (f.code === 'not-found') { loading.hidden = false; loading.querySelector('.loading-text').textContent = 'This session is not on the relay (or belongs to another token).'; loading.querySelector('.spinner').remove(); }
      else toast(f.message || f.code, 'error');
    }
  }

  // Envelopes withheld at the very end (e2e.tailWithheld): checked once
  // caught up, and again as envelopes and summaries come; said only if
  // they are still missing after a grace (they may be on their way).
  let tailTimer = null;
  function checkTail() {
    if (!caughtUp || left) return;
    if (!e2e.tailWithheld(id)) {
      clearTimeout(tailTimer);
      tailTimer = null;
      chainNote.setTail(null);
      document.body.dataset.tailChecked = id;
      return;
    }
    if (tailTimer) return;
    tailTimer = setTimeout(() => {
      tailTimer = null;
      if (left) return;
      chainNote.setTail(e2e.tailWithheld(id));
      document.body.dataset.tailChecked = id;
    }, e2e.TAIL_GRACE_MS);
  }

  // Subscribe once the list says how long the session is: a long one
  // starts from its tail.
  let subscribed = false;
  function subscribe() {
    if (subscribed || !app.listed) return;
    // A session on no page loaded yet (a link, a notification): its summary
    // is asked first, for its title and its length.
    if (!app.sessions.has(id) && askOne(id)) return;
    subscribed = true;
    const total = summary().lastSeq || 0;
    if (model.lastSeq === 0 && total > TAIL * 1.5) model.first = model.lastSeq = total - TAIL;
    app.conn.subscribe(id, () => model.lastSeq);
  }
  subscribe();
  if (model.envelopes > 0) {
    // Seen before on this page: show what we have while catching up.
    showView();
  } else {
    // Read here before: show the saved copy unless the relay is quicker.
    loadSession(id).then((saved) => {
      if (!saved || left || model.envelopes > 0 || caughtUp || !saved.items.length) return;
      model.lastSeq = saved.first - 1;
      if (saved.first > 1) model.first = saved.first - 1;
      for (const [seq, env] of saved.items) {
        try { model.apply(seq, env); } catch { /* skipped when it came */ }
      }
      if (!app.sessions.has(id) && saved.summary?.id === id) app.sessions.set(id, saved.summary);
      staleNote.textContent = staleText(saved.savedAt);
      staleNote.hidden = false;
      document.body.dataset.offlineCopy = id;
      showView();
      renderHeader();
    }).catch(() => {});
  }
  renderHeader();

  // redraw brings the page up to the model after the tab was hidden: one
  // drawing, where the reader was (at the end if they were there).
  function redraw() {
    if (!stale || hidden()) return;
    stale = false;
    if (view) {
      const shown = model.blocks.length - view.from;
      view.destroy();
      view = new ConversationView(model, conv, viewOpts(shown));
      rendered();
      settlePending();
      if (stick) scrollToEnd(); else newPill.hidden = false;
    } else if (caughtUp || model.envelopes > 0) {
      showView();
    }
    renderHeader();
  }

  // Whether this session's machine is connected, asked of the relay when
  // the connection opens, every tick, and when a prompt is queued.
  function showMachine(on) {
    if (machine.hidden !== on) return;
    machine.hidden = !on;
    machineText();
    renderHeader();
  }
  // What the note says: the machine offline, or ccrelay stopped there.
  function machineText() {
    const note = goneState(info(), true)?.note || '';
    if (machine.textContent !== note) machine.textContent = note;
  }
  let machineCheck = 0;
  let machineChecked = false;
  async function checkMachine() {
    const n = ++machineCheck;
    if (app.conn.state !== 'open' || !info().mode) { showMachine(false); return; }
    const r = await app.conn.status(id);
    if (n !== machineCheck || left) return;
    machineChecked = true;
    showMachine(r.code === 200 && r.cli === false && app.conn.state === 'open');
  }
  checkMachine();

  return {
    onFrame: (f) => {
      onFrame(f);
      if (f.type === 'command-status' && f.status === 'queued') checkMachine();
    },
    // A session change after the machine was said offline may be its
    // return (it announces itself again).
    onSessions: () => { subscribe(); checkTail(); renderHeader(); view?.costsChanged(); if (!machine.hidden || !machineChecked || info().cliGone) checkMachine(); },
    onConn: (s) => { banner.set(s); renderHeader(); if (s === 'open') checkMachine(); else showMachine(false); },
    onVisible: redraw,
    onSkip: note.update,
    // The connection keeps dying when this session's next frame arrives:
    // the browser cannot read it. Go on after the envelope it starts with.
    onStuck: (d) => {
      if (d.session !== id || model.lastSeq !== d.after) return;
      model.lastSeq = d.after + 1;
      skip(`envelope ${d.after + 1}, in a frame this browser could not read`, 'envelope:' + id + ':' + (d.after + 1));
    },
    tick: () => { renderHeader(); checkMachine(); },
    leave() {
      left = true;
      clearTimeout(tailTimer);
      earlierWS?.close();
      view?.destroy();
      ro.disconnect();
      removeEventListener('scroll', onScroll);
      app.conn.subscribe(null);
    },
  };
}

let toastTimer = null;
function toast(text, kind = '') {
  let el = document.querySelector('.toast');
  if (!el) { el = h('div', { class: 'toast', role: 'status' }); document.body.append(el); }
  el.replaceChildren(...prose(text));
  el.dataset.kind = kind;
  el.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.hidden = true; }, 5000);
}

start();
