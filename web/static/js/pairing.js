// Pairing and this device's identity.
//
// `ccrelay pair` prints a link https://<relay>/#pair=<code>.<fingerprint>.
// The fragment never reaches the relay; the app takes it out of the address
// bar at once, then redeems the code (single use, 5 minutes) for a device
// credential of its own, named from the user agent (editable).
//
// The credential is kept in localStorage: only this origin's scripts can
// read it, and the CSP (script-src 'self', no inline script) lets no other
// script run here. IndexedDB would guard it no better — both are
// per-origin — while localStorage is synchronous to read at start; the
// non-extractable keys of end-to-end encryption, which are CryptoKey
// objects, will live in IndexedDB, which can hold them.

import { h, icon } from './dom.js';
import * as S from '../seal.js';
import { device, rememberMachine } from './e2e.js';
import { signedOut, signingOutHere } from './forget.js';

export const DEVICE_KEY = 'ccrelay.device'; // {name, fingerprint} of this device

/** takePairing returns {code, machineKey, secret} (or, from an older
 * link, {code, fingerprint}) from a #pair= link, and removes it from the
 * address bar (and so from the history). */
export function takePairing() {
  const m = /(?:^#|[#&])pair=([0-9A-Za-z]+)(?:\.([0-9A-Za-z_-]*))?(?:\.([0-9A-Za-z_-]{22}))?/.exec(location.hash);
  if (!m) return null;
  history.replaceState(null, '', location.pathname + location.search + '#/');
  if (m[3] && m[2] && m[2].length === 43) return { code: m[1], machineKey: m[2], secret: m[3] };
  return { code: m[1], fingerprint: m[2] || '' };
}

// std is standard padded base64, as the relay's JSON takes bytes.
function std(bytes) {
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin);
}

/** proof is what a device sends with its redemption: its public key and
 * its confirmation of both keys, made with the link's secret (the relay
 * never sees the secret, so it cannot make one for other keys). */
async function proof(pair) {
  if (!pair.secret) return {};
  const dev = await device();
  const { confirm } = await S.pairingKeys(pair.secret);
  const tag = await S.confirmTag(confirm, S.ROLE_DEVICE, S.b64decode(pair.machineKey), dev.publicKey);
  return { publicKey: std(dev.publicKey), confirm: std(S.b64decode(tag)) };
}

/** deviceName guesses a name for this device from its user agent. */
export function deviceName(ua = navigator.userAgent) {
  if (/iPhone/.test(ua)) return 'iPhone';
  if (/iPad/.test(ua)) return 'iPad';
  const android = /Android[^;)]*;\s*([^;)]+?)(?:\s+Build|\))/.exec(ua);
  if (android && !/^(wv|K|Mobile)$/.test(android[1].trim())) return android[1].trim();
  if (/Android/.test(ua)) return 'Android phone';
  if (/Macintosh/.test(ua)) return 'Mac';
  if (/Windows/.test(ua)) return 'Windows PC';
  if (/CrOS/.test(ua)) return 'Chromebook';
  if (/Linux/.test(ua)) return 'Linux';
  return 'Browser';
}

/** showPairPage asks for this device's name and redeems the code; on
 * success it stores the credential under tokenKey and calls done. */
export function showPairPage(root, pair, tokenKey, done) {
  const input = h('input', { type: 'text', value: deviceName(), maxlength: '64', 'aria-label': 'Device name', autocomplete: 'off', class: 'pair-name' });
  const err = h('p', { class: 'pair-error', role: 'alert', hidden: true });
  const button = h('button', { class: 'primary', type: 'submit', text: 'Pair' });
  const form = h('form', { class: 'token-form pair-form', onsubmit: async (e) => {
    e.preventDefault();
    button.disabled = true;
    err.hidden = true;
    try {
      const r = await fetch('/api/pair/redeem', {
        method: 'POST', cache: 'no-store', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ code: pair.code, name: input.value.trim(), ...(await proof(pair)) }),
      });
      const text = await r.text();
      if (!r.ok) throw new Error(text.trim() || ('the relay answered ' + r.status));
      const a = JSON.parse(text);
      if (pair.secret) {
        // Both ends must agree (docs/security.md, "Pairing: trusting a
        // device"): the device answers the pairing, and the machine trusts
        // it only on its acceptance, a tag only the link's secret makes.
        const answer = (body) => fetch('/api/pair/answer', {
          method: 'POST', cache: 'no-store',
          headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + a.credential },
          body: JSON.stringify({ code: pair.code, ...body }),
        });
        // The relay must name the machine the link names: a relay that
        // swapped its key is caught here, the machine is told (its
        // credential is revoked), and nothing is kept.
        if (typeof a.machineKey !== 'string' || a.machineKey !== std(S.b64decode(pair.machineKey))) {
          await answer({ refused: 'the relay passed on another machine key than the pairing link names' }).catch(() => {});
          throw new Error('the relay changed the machine\'s key on the way: this device is not paired. Tell whoever runs the relay, and pair again.');
        }
        const dev = await device();
        const { confirm } = await S.pairingKeys(pair.secret);
        const tag = await S.confirmTag(confirm, S.ROLE_DEVICE_ACCEPTED, S.b64decode(pair.machineKey), dev.publicKey);
        const ok = await answer({ accepted: std(S.b64decode(tag)) });
        if (!ok.ok) throw new Error('the relay did not pass on this device\'s acceptance of the machine\'s key (' + ((await ok.text()).trim() || ok.status) + '): pair again.');
        await rememberMachine(pair.machineKey);
      }
      localStorage.setItem(tokenKey, a.credential);
      localStorage.setItem(DEVICE_KEY, JSON.stringify({ name: a.name, fingerprint: pair.secret ? await S.fingerprint(S.b64decode(pair.machineKey)) : pair.fingerprint }));
      done();
    } catch (x) {
      err.textContent = 'Pairing failed: ' + (x.message || x);
      err.hidden = false;
      button.disabled = false;
    }
  } }, input, button);
  root.replaceChildren(h('main', { class: 'empty-page pair-page' },
    h('div', { class: 'logo' }, icon('phone')),
    h('h1', { text: 'Pair this device' }),
    h('p', { text: 'This device gets its own credential for your relay. Name it, so you can tell it apart (and sign it out) later.' }),
    form, err));
}

/** deviceBar shows which device this is, lets it be renamed, and signs it
 * out (the relay revokes the credential; the device forgets its
 * credential, keys and sessions: forget.js). */
export function deviceBar(token) {
  const stored = safeParse(localStorage.getItem(DEVICE_KEY));
  const name = h('span', { class: 'device-name', text: stored?.name || '' });
  const bar = h('footer', { class: 'device-bar' },
    h('span', { class: 'device-label', text: 'This device: ' }), name,
    h('button', { class: 'link-btn device-rename', type: 'button', text: 'Rename', onclick: rename }),
    h('button', { class: 'link-btn device-signout', type: 'button', text: 'Sign out this device', onclick: signOut }));
  const call = (path, body) => fetch(path, {
    method: body ? 'POST' : 'GET', cache: 'no-store',
    headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' },
    body: body ? JSON.stringify(body) : undefined,
  });
  call('/api/me').then((r) => r.ok ? r.json() : null).then((me) => {
    if (!me) return;
    name.textContent = me.role === 'bootstrap' ? 'this machine (relay token)' : me.name;
    bar.dataset.role = me.role;
    if (me.role !== 'bootstrap') remember(me.name);
  }).catch(() => {});
  function remember(n) {
    const d = safeParse(localStorage.getItem(DEVICE_KEY)) || {};
    d.name = n;
    localStorage.setItem(DEVICE_KEY, JSON.stringify(d));
  }
  async function rename() {
    const to = prompt('Name of this device', name.textContent);
    if (!to || !to.trim()) return;
    const r = await call('/api/me/rename', { to: to.trim() });
    if (r.ok) { const a = await r.json(); name.textContent = a.name; remember(a.name); } else alert(await r.text());
  }
  async function signOut() {
    if (!confirm('Sign out this device? It will need a new pairing code to connect again.')) return;
    signingOutHere(true);
    const r = await call('/api/me/signout', {}).catch((e) => ({ ok: false, status: 0, text: async () => 'the relay cannot be reached: ' + (e.message || e) }));
    if (!r.ok && r.status !== 401) { signingOutHere(false); alert(await r.text()); return; }
    await signedOut('signout');
  }
  return bar;
}

function safeParse(s) {
  try { return JSON.parse(s); } catch { return null; }
}
