// Forgetting this device (docs/security.md, "What a revoked device
// keeps"). When this device signs out, or learns that the relay no longer
// takes its credential (revoked elsewhere, signed out in another tab), it
// deletes what it kept: the credential and the machines it paired with
// (localStorage), the sessions it opened and saved for offline reading, the
// service worker's copy of the credential (IndexedDB `ccrelay`), its
// private key (IndexedDB `ccrelay-keys`), its push subscription, and any
// cache but the app shell's (which holds only the app's own files). Then
// the page loads again, without anything of the device in memory, and says
// why it is signed out.

import { closeDB, DB_NAME } from './offline.js';

/** KEY_DB is the database of this device's private key (seal.js). */
export const KEY_DB = 'ccrelay-keys';
/** SHELL_CACHE_PREFIX names the service worker's caches of the app shell (sw.js: CACHE). */
export const SHELL_CACHE_PREFIX = 'ccrelay-shell-';
// API: paths of the relay's API (sw.js: API), which no cache may keep.
const API = /^\/(api|ws|status|push|health|sessions)(\/|$)/;
/** DELETE_WAIT_MS bounds the wait for a database whose deletion is blocked (another tab that does not let go). */
export const DELETE_WAIT_MS = 5000;
/** SIGNED_OUT is the fragment of the page that says this device was signed out: #signed-out=<why>. */
export const SIGNED_OUT = 'signed-out';

// deleteDB deletes a database, waiting at most DELETE_WAIT_MS for the
// connections that hold it open to close (each is told: versionchange).
function deleteDB(name) {
  return new Promise((resolve) => {
    if (!('indexedDB' in self)) { resolve(true); return; }
    const t = setTimeout(() => resolve(false), DELETE_WAIT_MS);
    let req;
    try {
      req = indexedDB.deleteDatabase(name);
    } catch {
      clearTimeout(t);
      resolve(false);
      return;
    }
    req.onsuccess = () => { clearTimeout(t); resolve(true); };
    req.onerror = () => { clearTimeout(t); resolve(false); };
  });
}

/**
 * forgetDevice deletes everything this device kept of the relay, its
 * sessions and its keys. It never throws: what cannot be deleted (a
 * browser without IndexedDB, a database another tab holds) is left, and
 * the result says so: {ok, left: [names]}.
 */
export async function forgetDevice() {
  const left = [];
  // The credential first: from now on nothing can use it.
  try {
    for (const k of Object.keys(localStorage)) if (k.startsWith('ccrelay.')) localStorage.removeItem(k);
  } catch {
    left.push('localStorage');
  }
  await closeDB();
  for (const name of [DB_NAME, KEY_DB]) if (!(await deleteDB(name))) left.push(name);
  try {
    const reg = await navigator.serviceWorker?.getRegistration?.();
    const sub = await reg?.pushManager?.getSubscription?.();
    await sub?.unsubscribe();
  } catch {
    left.push('push subscription');
  }
  try {
    if (self.caches) {
      for (const k of await caches.keys()) {
        if (!k.startsWith(SHELL_CACHE_PREFIX)) { await caches.delete(k); continue; }
        // The shell's cache keeps the app's files only; an answer of the
        // relay's API an older worker kept goes.
        const c = await caches.open(k);
        for (const r of await c.keys()) if (API.test(new URL(r.url).pathname)) await c.delete(r);
      }
    }
  } catch {
    left.push('caches');
  }
  return { ok: left.length === 0, left };
}

// forgetting: the forgetting under way (once per page); signingOut: this
// device asked the relay to sign it out (its sockets close as revoked).
let forgetting = null;
let signingOut = false;

/** signingOutHere records that this device asks to be signed out (on: false if the relay refused). */
export function signingOutHere(on) { signingOut = on; }

/**
 * signedOut forgets this device and loads the page again on the page that
 * says why (why: 'signout', this device signed out; 'revoked', the relay
 * refused its credential). It runs once per page.
 */
export function signedOut(why) {
  forgetting ??= (async () => {
    await forgetDevice();
    location.replace(location.pathname + location.search + '#' + SIGNED_OUT + '=' + (signingOut ? 'signout' : why));
    location.reload();
  })();
  return forgetting;
}

/** takeSignedOut reads (and takes out of the address bar) why the page says this device was signed out; '' when it does not. */
export function takeSignedOut() {
  const m = new RegExp('^#' + SIGNED_OUT + '=(signout|revoked)$').exec(location.hash);
  if (!m) return '';
  history.replaceState(null, '', location.pathname + location.search + '#/');
  return m[1];
}
