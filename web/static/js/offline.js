// What the app keeps in the browser (IndexedDB), for offline reading and
// for the service worker: the relay's credential and this device's id (the
// service worker needs both to fetch a notification's text and to answer a
// permission from a notification), the last session list, and the sessions
// read here, each a contiguous run of its envelopes. Sessions are bounded by
// size: past MAX_OFFLINE_BYTES the least recently saved are dropped.
//
// The service worker (sw.js) opens the same database; DB_NAME, DB_VERSION
// and the store names must match there.

export const DB_NAME = 'ccrelay';
export const DB_VERSION = 1;
// The sessions kept for offline reading weigh at most this many bytes of
// envelope JSON, in all; the least recently saved go first.
export const MAX_OFFLINE_BYTES = 16 * 1024 * 1024;

let dbPromise = null;
// closed: this device is being forgotten (forget.js): nothing is opened or
// written again in this page's life.
let closed = false;

/** openDB opens (creating on first use) the app's database; null without IndexedDB. */
export function openDB() {
  if (closed || !('indexedDB' in self)) return Promise.resolve(null);
  dbPromise ||= new Promise((resolve) => {
    const req = indexedDB.open(DB_NAME, DB_VERSION);
    req.onupgradeneeded = () => {
      const db = req.result;
      if (!db.objectStoreNames.contains('kv')) db.createObjectStore('kv');
      if (!db.objectStoreNames.contains('sessions')) db.createObjectStore('sessions', { keyPath: 'id' });
      if (!db.objectStoreNames.contains('envelopes')) db.createObjectStore('envelopes', { keyPath: ['session', 'seq'] });
    };
    req.onsuccess = () => {
      const db = req.result;
      // Another tab deletes the database (this device signs out): let go.
      db.onversionchange = () => { db.close(); dbPromise = null; };
      resolve(db);
    };
    req.onerror = () => resolve(null); // private mode, quota: the app works without it
  });
  return dbPromise;
}

/**
 * closeDB closes the database for good in this page (the device is
 * forgotten): saves under way end first, and nothing is written after.
 */
export async function closeDB() {
  closed = true;
  await Promise.allSettled([...chains.values()]);
  const db = await dbPromise;
  dbPromise = null;
  db?.close();
}

function done(tx) {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error);
  });
}

function result(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

/** kvGet reads a value of the 'kv' store (undefined when missing). */
export async function kvGet(key) {
  const db = await openDB();
  if (!db) return undefined;
  return result(db.transaction('kv').objectStore('kv').get(key));
}

/** kvSet writes a value of the 'kv' store (undefined deletes it). */
export async function kvSet(key, value) {
  const db = await openDB();
  if (!db) return;
  const tx = db.transaction('kv', 'readwrite');
  if (value === undefined) tx.objectStore('kv').delete(key); else tx.objectStore('kv').put(value, key);
  await done(tx);
}

/** saveList keeps the session list as the relay last sent it. */
export async function saveList(sessions) {
  await kvSet('list', { sessions, savedAt: Date.now() });
}

/** loadList returns {sessions, savedAt} or undefined. */
export async function loadList() {
  return kvGet('list');
}

// Saves of one session are chained: each appends after the last.
const chains = new Map();

/**
 * saveItems appends a session's envelopes ({seq, envelope}) to what is kept
 * of it. Only a contiguous run is kept: items that do not follow the last
 * one kept (a gap) start the run again.
 */
export function saveItems(session, summary, items) {
  const prev = chains.get(session) || Promise.resolve();
  const next = prev.then(() => append(session, summary, items)).catch((e) => console.warn('offline copy not saved', e));
  chains.set(session, next);
  return next;
}

async function append(session, summary, items) {
  const db = await openDB();
  if (!db || !items.length) return;
  const tx = db.transaction(['sessions', 'envelopes'], 'readwrite');
  const ss = tx.objectStore('sessions');
  const es = tx.objectStore('envelopes');
  let meta = await result(ss.get(session));
  let { first, last, bytes } = meta || { first: 0, last: 0, bytes: 0 };
  for (const it of items) {
    if (!it || !Number.isFinite(it.seq)) continue;
    if (last && it.seq <= last) continue; // kept already
    if (last && it.seq !== last + 1) { // a gap: start again from here
      es.delete(IDBKeyRange.bound([session, -Infinity], [session, Infinity]));
      first = 0;
      bytes = 0;
    }
    const n = JSON.stringify(it.envelope).length;
    es.put({ session, seq: it.seq, envelope: it.envelope });
    if (!first) first = it.seq;
    last = it.seq;
    bytes += n;
  }
  meta = { id: session, summary, first, last, bytes, savedAt: Date.now() };
  ss.put(meta);
  await done(tx);
  await evict(db, session);
}

/**
 * saveEarlier adds envelopes ([[seq, envelope]], in order) that come just
 * before the run kept of a session, ending at its first - 1: a session
 * opened at its end (app.js, TAIL) keeps its beginning too once that is
 * read, so what the device keeps of it (its usage included) is whole.
 * Items that do not end there or have a gap are left out.
 */
export function saveEarlier(session, items) {
  const prev = chains.get(session) || Promise.resolve();
  const next = prev.then(() => prepend(session, items)).catch((e) => console.warn('offline copy not saved', e));
  chains.set(session, next);
  return next;
}

async function prepend(session, items) {
  const db = await openDB();
  if (!db || !items.length) return;
  const from = items[0][0];
  if (!items.every(([seq], i) => seq === from + i)) return;
  const tx = db.transaction(['sessions', 'envelopes'], 'readwrite');
  const ss = tx.objectStore('sessions');
  const es = tx.objectStore('envelopes');
  const meta = await result(ss.get(session));
  if (!meta || meta.first !== from + items.length) return;
  let bytes = meta.bytes || 0;
  for (const [seq, envelope] of items) {
    es.put({ session, seq, envelope });
    bytes += JSON.stringify(envelope).length;
  }
  ss.put({ ...meta, first: from, bytes });
  await done(tx);
  await evict(db, session);
}

// evict drops the least recently saved sessions (never keep, the one being
// read) until the kept ones weigh at most MAX_OFFLINE_BYTES.
async function evict(db, keep, limit = MAX_OFFLINE_BYTES) {
  const all = await result(db.transaction('sessions').objectStore('sessions').getAll());
  let total = all.reduce((n, s) => n + (s.bytes || 0), 0);
  all.sort((a, b) => a.savedAt - b.savedAt);
  for (const s of all) {
    if (total <= limit) break;
    if (s.id === keep) continue;
    const tx = db.transaction(['sessions', 'envelopes'], 'readwrite');
    tx.objectStore('sessions').delete(s.id);
    tx.objectStore('envelopes').delete(IDBKeyRange.bound([s.id, -Infinity], [s.id, Infinity]));
    await done(tx);
    total -= s.bytes || 0;
  }
}

/** loadSession returns {summary, first, last, savedAt, items: [[seq, envelope]]} or undefined. */
export async function loadSession(session) {
  const db = await openDB();
  if (!db) return undefined;
  const tx = db.transaction(['sessions', 'envelopes']);
  const meta = await result(tx.objectStore('sessions').get(session));
  if (!meta) return undefined;
  const rows = await result(tx.objectStore('envelopes').getAll(IDBKeyRange.bound([session, -Infinity], [session, Infinity])));
  return { ...meta, items: rows.map((r) => [r.seq, r.envelope]) };
}

/** savedSessions lists what is kept: [{id, bytes, savedAt}] (for tests and people). */
export async function savedSessions() {
  const db = await openDB();
  if (!db) return [];
  const all = await result(db.transaction('sessions').objectStore('sessions').getAll());
  return all.map(({ id, bytes, savedAt, first, last }) => ({ id, bytes, savedAt, first, last }));
}

// For tests: evict with another limit.
export async function evictTo(limit) {
  const db = await openDB();
  if (db) await evict(db, null, limit);
}

/** forgetSession drops what is kept of a session (it was deleted on the relay). */
export async function forgetSession(session) {
  const db = await openDB();
  if (!db) return;
  await chains.get(session);
  const tx = db.transaction(['sessions', 'envelopes'], 'readwrite');
  tx.objectStore('sessions').delete(session);
  tx.objectStore('envelopes').delete(IDBKeyRange.bound([session, -Infinity], [session, Infinity]));
  await done(tx);
}

/**
 * keepOnly drops the kept sessions that are not in ids (the relay's whole
 * list, just received): sessions deleted on the relay, or removed by its
 * retention, while this app was away.
 */
export async function keepOnly(ids) {
  const db = await openDB();
  if (!db) return;
  const all = await result(db.transaction('sessions').objectStore('sessions').getAllKeys());
  for (const id of all) if (!ids.has(id)) await forgetSession(id);
}
