// Notifications on this device: the service worker's registration and the
// settings sheet where a device chooses what it is told of. The relay keeps
// one push subscription per device id (made once, kept in IndexedDB and
// localStorage: offline.js), with the kinds chosen.

import { h } from './dom.js';
import { kvSet } from './offline.js';

// KINDS are the relay's notification kinds (relay.PushKinds), as the sheet
// names them.
export const KINDS = [
  ['permission', 'A permission request is waiting'],
  ['turn', 'A turn finished'],
  ['failed', 'A session failed'],
  ['agent', 'A background agent finished'],
];

// PUSH_DEVICE_KEY keeps this browser's id for the relay's notifications and
// visibility (the relay's device ids: 16 to 64 letters, digits, '-' or '_').
// It was once kept under 'ccrelay.device', which pairing uses for this
// device's name and fingerprint (pairing.js): an id found there is moved
// here, so that the subscription made with it is still this device's.
export const PUSH_DEVICE_KEY = 'ccrelay.push-device';
const OLD_PUSH_DEVICE_KEY = 'ccrelay.device';
const PUSH_DEVICE_ID = /^[A-Za-z0-9_-]{16,64}$/;

/** pushDevice is this browser's id for notifications: the one kept, else one made with make() and kept. */
export function pushDevice(make) {
  const kept = localStorage.getItem(PUSH_DEVICE_KEY);
  if (kept && PUSH_DEVICE_ID.test(kept)) return kept;
  const old = localStorage.getItem(OLD_PUSH_DEVICE_KEY);
  const id = old && PUSH_DEVICE_ID.test(old) ? old : make();
  localStorage.setItem(PUSH_DEVICE_KEY, id);
  // Pairing's JSON stays where it is; an id is gone from there once moved.
  if (id === old) localStorage.removeItem(OLD_PUSH_DEVICE_KEY);
  return id;
}

/** registerWorker registers sw.js (the app shell offline, notifications); null where unsupported. */
export async function registerWorker() {
  if (!('serviceWorker' in navigator)) return null;
  try {
    return await navigator.serviceWorker.register('sw.js', { scope: './' });
  } catch (e) {
    console.warn('service worker not registered', e);
    return null;
  }
}

/** keepCredential gives the service worker the relay's credential (IndexedDB). */
export function keepCredential(token) {
  return kvSet('token', token).catch(() => {});
}

/** keepPaired tells the service worker whether this device paired with machines: then a
 * notification of a plaintext session offers no Allow or Deny (the page asks to confirm). */
export function keepPaired(paired) {
  return kvSet('paired', !!paired).catch(() => {});
}

async function api(token, method, path, body) {
  const res = await fetch(path, {
    method, cache: 'no-store',
    headers: { Authorization: 'Bearer ' + token, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  let json = null;
  try { json = await res.json(); } catch { /* 204 */ }
  return { code: res.status, json };
}

function keyBytes(b64url) {
  const s = atob(b64url.replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}

/**
 * openNotifications fills dialog with the notification settings of this
 * device and shows it.
 */
export async function openNotifications(dialog, { token, device }) {
  const status = h('p', { class: 'meta', role: 'status', text: 'Asking the relay…' });
  const boxes = KINDS.map(([k, label]) => {
    const input = h('input', { type: 'checkbox', name: k, checked: true });
    return { k, input, el: h('label', { class: 'check' }, input, h('span', { text: label })) };
  });
  const save = h('button', { class: 'wide primary', type: 'button', text: 'Turn on', disabled: true });
  const off = h('button', { class: 'wide', type: 'button', text: 'Turn off', hidden: true });
  dialog.replaceChildren(h('form', { method: 'dialog', class: 'sheet-body notify-sheet' },
    h('div', { class: 'sheet-title', text: 'Notifications' }),
    h('p', { class: 'meta', text: 'Tell this device when:' }),
    boxes.map((b) => b.el),
    status, save, off,
    h('button', { class: 'wide', value: 'close', text: 'Close' })));
  dialog.showModal();

  const say = (t) => { status.textContent = t; };
  const supported = 'serviceWorker' in navigator && 'PushManager' in self && 'Notification' in self;
  if (!supported || !isSecureContext) {
    say(isSecureContext ? 'This browser cannot show notifications from a web app (on iOS, add ccrelay to the Home Screen first).' : 'Notifications need HTTPS (or this machine\'s own address). Ask the relay\'s operator for --notify-ntfy instead.');
    return;
  }
  let key;
  try {
    key = await api(token, 'GET', '/push/key');
  } catch {
    say('The relay cannot be reached: try again when online.');
    return;
  }
  if (key.code !== 200 || !key.json?.webPush) { say('This relay does not send Web Push.'); return; }
  const mine = await api(token, 'GET', '/push/subscription?device=' + encodeURIComponent(device)).catch(() => ({ code: 0 }));
  const on = mine.code === 200 && Array.isArray(mine.json?.kinds);
  if (on) for (const b of boxes) b.input.checked = mine.json.kinds.includes(b.k);
  save.textContent = on ? 'Save' : 'Turn on';
  save.disabled = false;
  off.hidden = !on;
  say(on ? 'On for this device.' : Notification.permission === 'denied' ? 'This browser blocks notifications for ccrelay: allow them in its site settings.' : 'Off for this device.');

  save.onclick = async () => {
    save.disabled = true;
    try {
      if (await Notification.requestPermission() !== 'granted') { say('Notifications were not allowed.'); return; }
      const reg = await navigator.serviceWorker.ready;
      let sub = await reg.pushManager.getSubscription();
      if (!sub) sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(key.json.publicKey) });
      const kinds = boxes.filter((b) => b.input.checked).map((b) => b.k);
      await keepCredential(token);
      const r = await api(token, 'PUT', '/push/subscription', { device, subscription: sub.toJSON(), kinds });
      if (r.code !== 204) { say('The relay refused: ' + (r.json?.error || r.code)); return; }
      say('On for this device.');
      save.textContent = 'Save';
      off.hidden = false;
    } catch (e) {
      say('Could not subscribe: ' + (e?.message || e));
    } finally {
      save.disabled = false;
    }
  };
  off.onclick = async () => {
    off.disabled = true;
    try {
      await api(token, 'DELETE', '/push/subscription?device=' + encodeURIComponent(device));
      const sub = await (await navigator.serviceWorker.ready).pushManager.getSubscription();
      await sub?.unsubscribe();
      say('Off for this device.');
      save.textContent = 'Turn on';
      off.hidden = true;
    } catch (e) {
      say('Could not turn off: ' + (e?.message || e));
    } finally {
      off.disabled = false;
    }
  };
}
