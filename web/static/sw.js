// ccrelay's service worker: the app shell offline, and notifications.
//
// Shell: the app's files are fetched from the network first (so a new relay's
// app shows at once) and kept in a cache; with no network they come from it.
// Nothing of the relay's API (/api/, /ws/, /status, /push/, /health, /sessions) is cached.
//
// Notifications: a push carries only {session, kind, seq}. The worker asks
// the relay (GET /push/session, with the credential the app keeps in
// IndexedDB) what it needs to write the text. A permission request shows
// Allow and Deny, which send the command over a websocket of their own;
// tapping a notification opens the session. A request answered elsewhere
// (an answered push, or a late push for it) never says Claude waits: its
// notification is replaced by one that says it was answered.

const CACHE = 'ccrelay-shell-3';
// The app shell: every file of the app (web_test.go checks the list).
const SHELL = [
  './',
  'app.css',
  'apple-touch-icon.png',
  'icon-192.png',
  'icon-512.png',
  'icon-maskable-512.png',
  'icon.svg',
  'index.html',
  'js/ansi.js',
  'js/app.js',
  'js/conn.js',
  'js/copy.js',
  'js/diff.js',
  'js/dom.js',
  'js/e2e.js',
  'js/find.js',
  'js/forget.js',
  'js/format.js',
  'js/gone.js',
  'js/highlight.js',
  'js/listfilter.js',
  'js/machines.js',
  'js/markdown.js',
  'js/markup.js',
  'js/model.js',
  'js/notify.js',
  'js/offline.js',
  'js/pairing.js',
  'js/paths.js',
  'js/prices.js',
  'js/tools.js',
  'js/usage.js',
  'js/view.js',
  'manifest.webmanifest',
  'seal.js',
];
// Paths of the relay's API: never cached, never answered from the cache.
const API = /^\/(api|ws|status|push|health|sessions)(\/|$)/;
// A command from a notification gives up after this long.
const COMMAND_TIMEOUT_MS = 15000;
// The database the app shares (offline.js: DB_NAME, DB_VERSION).
const DB_NAME = 'ccrelay';
const DB_VERSION = 1;

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(CACHE).then((c) => c.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil((async () => {
    for (const k of await caches.keys()) if (k !== CACHE) await caches.delete(k);
    await self.clients.claim();
  })());
});

self.addEventListener('fetch', (event) => {
  const req = event.request;
  const url = new URL(req.url);
  if (req.method !== 'GET' || url.origin !== location.origin || API.test(url.pathname)) return;
  event.respondWith((async () => {
    const cache = await caches.open(CACHE);
    try {
      const res = await fetch(req);
      if (res.ok && res.type === 'basic') cache.put(req.mode === 'navigate' ? './' : req, res.clone());
      return res;
    } catch (e) {
      const hit = await cache.match(req.mode === 'navigate' ? './' : req, { ignoreSearch: true });
      if (hit) return hit;
      throw e;
    }
  })());
});

// --- the shared database -------------------------------------------------------

// kv runs op on the database's kv store (mode 'readonly' or 'readwrite')
// and resolves to its request's result (undefined when it fails).
function kv(mode, op) {
  return new Promise((resolve) => {
    const open = indexedDB.open(DB_NAME, DB_VERSION);
    open.onupgradeneeded = () => {
      const db = open.result;
      if (!db.objectStoreNames.contains('kv')) db.createObjectStore('kv');
      if (!db.objectStoreNames.contains('sessions')) db.createObjectStore('sessions', { keyPath: 'id' });
      if (!db.objectStoreNames.contains('envelopes')) db.createObjectStore('envelopes', { keyPath: ['session', 'seq'] });
    };
    open.onerror = () => resolve(undefined);
    open.onsuccess = () => {
      // Closed after each use: a device that signs out deletes the
      // database, which an open connection would hold up.
      const db = open.result;
      db.onversionchange = () => db.close();
      let r;
      try {
        r = op(db.transaction('kv', mode).objectStore('kv'));
      } catch {
        db.close();
        resolve(undefined);
        return;
      }
      r.onsuccess = () => { db.close(); resolve(r.result); };
      r.onerror = () => { db.close(); resolve(undefined); };
    };
  });
}

const kvGet = (key) => kv('readonly', (st) => st.get(key));
const kvPut = (key, value) => kv('readwrite', (st) => st.put(value, key));

// --- notifications ---------------------------------------------------------------

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const KINDS = {
  permission: 'Claude is waiting for you',
  turn: 'Claude finished',
  failed: 'A session failed',
  agent: 'A background agent finished',
};

// kindText is what a notification of kind says for a session whose info
// is info: naming its agent (Claude Code's when an older machine names
// none), or none where the info is sealed and the agent not known here.
function kindText(kind, info) {
  const who = info.agent === 'codex' ? 'Codex' : info.agent === 'claude' || typeof info.sealed !== 'string' ? 'Claude' : '';
  if (kind === 'permission') return who ? who + ' is waiting for you' : 'A session is waiting for you';
  if (kind === 'turn') return who ? who + ' finished' : 'A session finished';
  return KINDS[kind];
}

// untitled names a session without a title or prompt.
function untitled(info) {
  return info.agent === 'codex' ? 'a Codex session' : info.agent === 'claude' || typeof info.sealed !== 'string' ? 'a Claude session' : 'a session';
}

// ANSWERED: a permission request notified before no longer waits (answered
// elsewhere, or cancelled): its notification is replaced.
const ANSWERED = 'answered';

// Pushes handled so far (for people and tests poking at the worker).
self.pushesHandled = 0;

self.addEventListener('push', (event) => {
  let p = null;
  try { p = event.data?.json(); } catch { /* not JSON */ }
  if (!p || typeof p.session !== 'string' || !UUID.test(p.session) || !(Object.hasOwn(KINDS, p.kind) || p.kind === ANSWERED)) return;
  if (!Number.isSafeInteger(p.seq)) p.seq = 0;
  event.waitUntil((p.kind === ANSWERED ? answered(p) : notify(p)).finally(() => { self.pushesHandled++; }));
});

function oneLine(s, n) {
  s = String(s || '').replace(/\s+/g, ' ').trim();
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
}

// notify writes the notification of a push: the session's title and, for a
// permission request, what waits (fetched from the relay; without it, a
// generic text).
async function notify(p) {
  const s = await sessionNow(p.session);
  const info = (s && typeof s.info === 'object' && s.info) || {};
  const title = oneLine(info.title || s?.prompt || untitled(info), 80);
  const base = { icon: 'icon-192.png', badge: 'icon-192.png', timestamp: Date.now(), data: { session: p.session, kind: p.kind, seq: p.seq } };
  const perms = p.kind === 'permission' ? waitingRequests(s) : [];
  if (p.kind === 'permission') {
    // A push may come late (push services hold them for hours): what the
    // relay says now decides, and a request it no longer lists is not
    // said to wait. Without the relay, an answer this device already had
    // for a later point of the session does.
    if (s) {
      await replaceAnswered(p.session, s, title);
      if (!perms.length && info.status !== 'waiting-for-permission') return;
    } else if (p.seq <= ((await kvGet('answered:' + p.session)) ?? -1)) {
      return;
    }
  }
  // A device paired with machines sends to a plaintext session only once
  // the person confirms it in the page (it is not encrypted): no Allow or
  // Deny here either.
  const inPage = typeof info.sealed === 'string' || (await kvGet('paired').catch(() => false)) === true;
  if (perms.length) {
    for (const q of perms) {
      const what = [q.tool, q.description].filter((x) => typeof x === 'string' && x).join(': ');
      await self.registration.showNotification(kindText('permission', info), {
        ...base,
        tag: 'perm:' + p.session + ':' + q.id,
        body: oneLine((what ? what + ' — ' : '') + title, 180),
        requireInteraction: true,
        data: { ...base.data, request: q.id },
        // A sealed session takes only commands the page seals, and a
        // paired device confirms a plaintext one there: such requests are
        // answered in the app, which the tap opens.
        actions: inPage ? [] : [{ action: 'allow', title: 'Allow' }, { action: 'deny', title: 'Deny' }],
      });
    }
    return;
  }
  await self.registration.showNotification(kindText(p.kind, info), { ...base, tag: p.kind + ':' + p.session, body: title });
}

// sessionNow asks the relay for the session as lists show it now (null:
// no credential, or the relay did not answer).
async function sessionNow(session) {
  const token = await kvGet('token');
  if (!token) return null;
  try {
    const res = await fetch('/push/session?id=' + encodeURIComponent(session), { headers: { Authorization: 'Bearer ' + token }, cache: 'no-store' });
    if (res.ok) return await res.json();
  } catch { /* offline */ }
  return null;
}

// waitingRequests: the permission requests a session (as sessionNow
// gives it) lists as waiting.
function waitingRequests(s) {
  const info = (s && typeof s.info === 'object' && s.info) || {};
  return Array.isArray(info.permissions) ? info.permissions.filter((q) => q && typeof q.id === 'string') : [];
}

// answered handles an answered push: the session's permission
// notifications that no longer wait are replaced (without the relay, all of
// them: the push says one was answered, and the app shows what still waits).
async function answered(p) {
  const prev = (await kvGet('answered:' + p.session)) ?? -1;
  if (p.seq > prev) await kvPut('answered:' + p.session, p.seq);
  const s = await sessionNow(p.session);
  const info = (s && typeof s.info === 'object' && s.info) || {};
  await replaceAnswered(p.session, s, oneLine(info.title || s?.prompt || untitled(info), 80));
}

// replaceAnswered replaces each permission notification of session whose
// request s (sessionNow's; null: unknown, none waits) no longer lists by a
// quiet one with the same tag, which says it was answered.
async function replaceAnswered(session, s, title) {
  const ids = waitingRequests(s).map((q) => q.id);
  const generic = s?.info?.status === 'waiting-for-permission';
  for (const n of await self.registration.getNotifications()) {
    const d = n.data || {};
    if (d.session !== session || d.kind !== 'permission' || d.answered) continue;
    if (typeof d.request === 'string' ? ids.includes(d.request) : generic) continue;
    await self.registration.showNotification('Answered', {
      tag: n.tag, icon: 'icon-192.png', badge: 'icon-192.png', timestamp: Date.now(), silent: true,
      body: oneLine('No longer waiting — ' + title, 180),
      data: { ...d, answered: true },
    });
  }
}

self.addEventListener('notificationclick', (event) => {
  event.waitUntil(clicked(event.notification, event.action));
});

// The app's own pages may ask to act as if a notification were clicked
// (headless browsers cannot click one): the same code runs.
self.addEventListener('message', (event) => {
  const m = event.data;
  if (!m || m.type !== 'notification-click' || typeof m.tag !== 'string') return;
  event.waitUntil((async () => {
    const [n] = await self.registration.getNotifications({ tag: m.tag });
    if (n) await clicked(n, typeof m.action === 'string' ? m.action : '');
  })());
});

async function clicked(n, action) {
  const d = n.data || {};
  n.close();
  if (typeof d.session !== 'string' || !UUID.test(d.session)) return;
  if ((action === 'allow' || action === 'deny') && typeof d.request === 'string') {
    const r = await answer(d.session, d.request, action === 'allow');
    if (!r.ok) {
      await self.registration.showNotification('Not answered', {
        tag: 'perm:' + d.session + ':' + d.request, icon: 'icon-192.png', data: d,
        body: oneLine(r.message || 'The relay could not be reached. Open the session to answer.', 180),
      });
    }
    return;
  }
  await open(d.session, d.request);
}

// open shows the session (at the request) in an open window of the app, or
// a new one.
async function open(session, request) {
  const hash = '#/s/' + session + (request ? '?request=' + encodeURIComponent(request) : '');
  const wins = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
  const win = wins.find((w) => new URL(w.url).origin === location.origin);
  if (win) {
    win.postMessage({ type: 'open', hash });
    try { await win.focus(); } catch { /* not allowed without a click */ }
    return;
  }
  await self.clients.openWindow('./' + hash);
}

function newID() {
  const b = new Uint8Array(24);
  crypto.getRandomValues(b);
  let s = 'abcdefghijklmnopqrstuvwxyz'[b[0] % 26];
  for (let i = 1; i < 24; i++) s += (b[i] % 36).toString(36);
  return s;
}

// answer sends a permission answer as the app does (a command frame) and
// waits for the CLI's answer: {ok, message}.
async function answer(session, requestId, allow) {
  const token = await kvGet('token');
  if (!token) return { ok: false, message: 'This device has no credential for the relay. Open the app.' };
  const cmd = allow ? { kind: 'permission', requestId, allow: true } : { kind: 'permission', requestId, allow: false, reason: 'Denied from a ccrelay notification' };
  const id = newID();
  const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws/app';
  return new Promise((resolve) => {
    let ws;
    try { ws = new WebSocket(url, ['ccrelay-token.' + token]); } catch { resolve({ ok: false }); return; }
    const end = (r) => { clearTimeout(timer); ws.onclose = null; ws.close(); resolve(r); };
    const timer = setTimeout(() => end({ ok: false, message: 'No answer from the session\'s machine in time. Open the session to check.' }), COMMAND_TIMEOUT_MS);
    ws.onopen = () => ws.send(JSON.stringify({ v: 1, type: 'command', session, command: { id, ...cmd } }));
    ws.onmessage = (e) => {
      let f;
      try { f = JSON.parse(e.data); } catch { return; }
      if (f?.type !== 'command-status' || f.command?.id !== id) return;
      if (f.status === 'done') end({ ok: true });
      else if (f.status === 'rejected') end({ ok: false, message: 'Not answered: ' + (f.message || 'rejected') });
    };
    ws.onclose = () => end({ ok: false });
  });
}
