// seal.js: ccrelay's end-to-end cryptography in the browser, the twin of
// the Go package seal, over WebCrypto only (X25519, HKDF, HMAC, AES-GCM).
// HPKE base mode (RFC 9180) is written out here: LabeledExtract and
// LabeledExpand, DHKEM(X25519, HKDF-SHA256) and the key schedule. The
// formats are described byte by byte in docs/security.md; the Go side is
// authoritative and cmd/ccrelay/seal_browser_test.go checks that both agree.
//
// A device's private key is a non-extractable CryptoKey kept in IndexedDB:
// script can use it, nobody can read it out.

const subtle = globalThis.crypto.subtle;
const utf8 = new TextEncoder();

export const VERSION = 1;
// VERSION_EPOCH: a value sealed under a session key's later epoch (after a
// device was revoked), and a wrapped key set of several epochs.
export const VERSION_EPOCH = 2;
export const MAX_EPOCHS = 256;
export const KEY_SIZE = 32;
export const NONCE_SIZE = 12;
export const TAG_SIZE = 16;
export const OVERHEAD = 1 + NONCE_SIZE + TAG_SIZE;
export const OVERHEAD_EPOCH = OVERHEAD + 2;
export const MAX_PLAINTEXT_BYTES = 4 << 20;
export const MAX_SEALED_CHARS = Math.floor(((MAX_PLAINTEXT_BYTES + OVERHEAD_EPOCH) * 8 + 5) / 6);
export const MAX_AD_FIELD_BYTES = 255;
export const PUBLIC_KEY_SIZE = 32;
export const FINGERPRINT_SIZE = 16;
export const WRAPPED_SIZE = 1 + 32 + KEY_SIZE + TAG_SIZE + 32;
export const MAX_WRAPPED_SIZE = WRAPPED_SIZE + (MAX_EPOCHS - 1) * KEY_SIZE;
export const PAIRING_SECRET_SIZE = 16;

// Who sealed a value.
export const FROM_MACHINE = 1; // envelope bodies, announce fields, live deltas
export const FROM_DEVICE = 2; // app commands

// Roles of a pairing confirmation.
export const ROLE_MACHINE = 1;
export const ROLE_DEVICE = 2;
// The device's acceptance, made only once it checked the machine key the
// relay passed on: the machine trusts the device only with it.
export const ROLE_DEVICE_ACCEPTED = 3;

// A SealError's code says why: 'malformed', 'version', 'open' (tampered,
// moved, or another key), 'unwrap', 'confirm' (keys swapped on the way), or
// 'argument'.
export class SealError extends Error {
  constructor(code, message) {
    super(`seal: ${message || code}`);
    this.name = 'SealError';
    this.code = code;
  }
}

// ---- bytes and text ----

export const bytes = (s) => (typeof s === 'string' ? utf8.encode(s) : new Uint8Array(s));

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const B64URL = /^[A-Za-z0-9_-]*$/;
const nativeB64 = typeof Uint8Array.prototype.toBase64 === 'function' && typeof Uint8Array.fromBase64 === 'function';

// b64encode is unpadded base64url.
export function b64encode(b) {
  if (nativeB64) return b.toBase64({ alphabet: 'base64url', omitPadding: true });
  let bin = '';
  for (let i = 0; i < b.length; i += 0x8000) bin += String.fromCharCode.apply(null, b.subarray(i, i + 0x8000));
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

// b64decode reads unpadded base64url strictly, as Go's seal does: no
// padding, no other alphabet, unused trailing bits zero, so that each value
// has one text form.
export function b64decode(s) {
  if (typeof s !== 'string' || s.length % 4 === 1 || !B64URL.test(s)) throw new SealError('malformed', 'not base64url');
  const rest = s.length % 4; // 2 or 3 characters carry 4 or 2 unused bits
  if (rest && (B64.indexOf(s[s.length - 1]) & (rest === 2 ? 15 : 3)) !== 0) {
    throw new SealError('malformed', 'not canonical base64url');
  }
  if (nativeB64) return Uint8Array.fromBase64(s, { alphabet: 'base64url' });
  const bin = atob(s.replace(/-/g, '+').replace(/_/g, '/'));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function u16(n) {
  return new Uint8Array([(n >> 8) & 0xff, n & 0xff]);
}

// ---- HKDF-SHA256 and HMAC over WebCrypto ----

// hmacKey imports an HMAC-SHA256 key. WebCrypto refuses an empty key; HMAC
// pads keys with zeros, so 32 zero bytes give the same MAC as the empty key
// (RFC 5869's salt "not provided").
function hmacKey(raw, usages = ['sign']) {
  const k = raw.length === 0 ? new Uint8Array(32) : raw;
  return subtle.importKey('raw', k, { name: 'HMAC', hash: 'SHA-256' }, false, usages);
}

async function hmac(key, data) {
  return new Uint8Array(await subtle.sign('HMAC', await hmacKey(key), data));
}

async function extract(salt, ikm) {
  return hmac(salt, ikm);
}

async function expand(prk, info, length) {
  if (length > 255 * 32) throw new SealError('argument', 'HKDF length too large');
  const key = await hmacKey(prk);
  const out = new Uint8Array(length);
  let t = new Uint8Array(0);
  for (let i = 1, at = 0; at < length; i++) {
    t = new Uint8Array(await subtle.sign('HMAC', key, concat(t, info, new Uint8Array([i]))));
    out.set(t.subarray(0, Math.min(t.length, length - at)), at);
    at += t.length;
  }
  return out;
}

async function hkdf(secret, salt, info, length) {
  return expand(await extract(salt, secret), info, length);
}

// ---- HPKE base mode: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-GCM ----

const KEM_ID = 0x0020;
const KDF_ID = 0x0001;
export const AEAD_AES128GCM = 0x0001;
export const AEAD_AES256GCM = 0x0002; // the suite ccrelay uses
const AEAD_NK = { [AEAD_AES128GCM]: 16, [AEAD_AES256GCM]: 32 };
const HPKE_V1 = utf8.encode('HPKE-v1');
const KEM_SUITE = concat(utf8.encode('KEM'), u16(KEM_ID));
const hpkeSuite = (aead) => concat(utf8.encode('HPKE'), u16(KEM_ID), u16(KDF_ID), u16(aead));

const labeledExtract = (suite, salt, label, ikm) => extract(salt, concat(HPKE_V1, suite, utf8.encode(label), ikm));
const labeledExpand = (suite, prk, label, info, length) =>
  expand(prk, concat(u16(length), HPKE_V1, suite, utf8.encode(label), info), length);

const EMPTY = new Uint8Array(0);
// PKCS #8 header of an X25519 private key (RFC 8410), followed by its 32 bytes.
const PKCS8_X25519 = Uint8Array.from([0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x04, 0x22, 0x04, 0x20]);

async function publicRaw(publicKey) {
  return new Uint8Array(await subtle.exportKey('raw', publicKey));
}

function importPublic(raw) {
  if (raw.length !== PUBLIC_KEY_SIZE) throw new SealError('malformed', 'public key size');
  return subtle.importKey('raw', raw, { name: 'X25519' }, true, []);
}

// importPrivate imports the 32 bytes of an X25519 private key; the pair's
// public key bytes come with it.
async function importPrivate(raw, extractable = false) {
  const privateKey = await subtle.importKey('pkcs8', concat(PKCS8_X25519, raw), { name: 'X25519' }, true, ['deriveBits']);
  const jwk = await subtle.exportKey('jwk', privateKey);
  const pub = b64decode(jwk.x);
  const key = extractable ? privateKey : await subtle.importKey('pkcs8', concat(PKCS8_X25519, raw), { name: 'X25519' }, false, ['deriveBits']);
  return { privateKey: key, publicKey: pub };
}

async function dh(privateKey, publicRawBytes) {
  const pub = await importPublic(publicRawBytes);
  return new Uint8Array(await subtle.deriveBits({ name: 'X25519', public: pub }, privateKey, 256));
}

// deriveKeyPair is DHKEM's DeriveKeyPair (RFC 9180 7.1.3): a key pair from
// input keying material, for test vectors. It returns { privateKey (a
// CryptoKey), publicKey (32 bytes), secret (the 32 private bytes) }.
export async function deriveKeyPair(ikm) {
  const prk = await labeledExtract(KEM_SUITE, EMPTY, 'dkp_prk', ikm);
  const sk = await labeledExpand(KEM_SUITE, prk, 'sk', EMPTY, 32);
  return { ...(await importPrivate(sk)), secret: sk };
}

async function extractAndExpand(dhBytes, kemContext) {
  const prk = await labeledExtract(KEM_SUITE, EMPTY, 'eae_prk', dhBytes);
  return labeledExpand(KEM_SUITE, prk, 'shared_secret', kemContext, 32);
}

// encap: a fresh ephemeral key pair, or the one derived from ikmE (test
// vectors only).
async function encap(pkR, ikmE) {
  let eph;
  if (ikmE) {
    eph = await deriveKeyPair(ikmE);
  } else {
    const kp = await subtle.generateKey({ name: 'X25519' }, false, ['deriveBits']);
    eph = { privateKey: kp.privateKey, publicKey: await publicRaw(kp.publicKey) };
  }
  const shared = await extractAndExpand(await dh(eph.privateKey, pkR), concat(eph.publicKey, pkR));
  return { shared, enc: eph.publicKey };
}

async function decap(enc, skR, pkR) {
  return extractAndExpand(await dh(skR, enc), concat(enc, pkR));
}

async function keySchedule(aead, shared, info) {
  const suite = hpkeSuite(aead);
  const nk = AEAD_NK[aead];
  if (!nk) throw new SealError('argument', `unsupported AEAD ${aead}`);
  const pskIDHash = await labeledExtract(suite, EMPTY, 'psk_id_hash', EMPTY);
  const infoHash = await labeledExtract(suite, EMPTY, 'info_hash', info);
  const context = concat(new Uint8Array([0]), pskIDHash, infoHash); // mode_base
  const secret = await labeledExtract(suite, shared, 'secret', EMPTY);
  const key = await labeledExpand(suite, secret, 'key', context, nk);
  const baseNonce = await labeledExpand(suite, secret, 'base_nonce', context, NONCE_SIZE);
  const exporterSecret = await labeledExpand(suite, secret, 'exp', context, 32);
  const aesKey = await subtle.importKey('raw', key, 'AES-GCM', false, ['encrypt', 'decrypt']);
  return new HPKEContext(suite, aesKey, baseNonce, exporterSecret, { key, baseNonce, exporterSecret, shared });
}

// HPKEContext is an HPKE encryption context: seal or open messages in
// order, export secrets. `schedule` holds the derived values, for test
// vectors.
class HPKEContext {
  constructor(suite, aesKey, baseNonce, exporterSecret, schedule) {
    this.suite = suite;
    this.aesKey = aesKey;
    this.baseNonce = baseNonce;
    this.exporterSecret = exporterSecret;
    this.schedule = schedule;
    this.seq = 0;
  }

  nonce() {
    const n = this.baseNonce.slice();
    let s = this.seq;
    for (let i = n.length - 1; s > 0 && i >= 0; i--, s = Math.floor(s / 256)) n[i] ^= s & 0xff;
    return n;
  }

  async seal(aad, pt) {
    const ct = await subtle.encrypt({ name: 'AES-GCM', iv: this.nonce(), additionalData: aad }, this.aesKey, pt);
    this.seq++;
    return new Uint8Array(ct);
  }

  async open(aad, ct) {
    let pt;
    try {
      pt = await subtle.decrypt({ name: 'AES-GCM', iv: this.nonce(), additionalData: aad }, this.aesKey, ct);
    } catch {
      throw new SealError('open', 'HPKE ciphertext does not open');
    }
    this.seq++;
    return new Uint8Array(pt);
  }

  export(exporterContext, length) {
    return labeledExpand(this.suite, this.exporterSecret, 'sec', exporterContext, length);
  }
}

// hpke is HPKE base mode with DHKEM(X25519, HKDF-SHA256) and HKDF-SHA256.
// setupS(pkR bytes, info, aead, ikmE?) → { enc, ctx }; setupR(enc, skR
// CryptoKey, pkR bytes, info, aead) → ctx.
export const hpke = {
  async setupS(pkR, info, aead = AEAD_AES256GCM, ikmE = undefined) {
    const { shared, enc } = await encap(pkR, ikmE);
    return { enc, ctx: await keySchedule(aead, shared, info) };
  },
  async setupR(enc, skR, pkR, info, aead = AEAD_AES256GCM) {
    return keySchedule(aead, await decap(enc, skR, pkR), info);
  },
};

// ---- machine public keys and fingerprints ----

export function parsePublicKey(text) {
  const raw = b64decode(text);
  if (raw.length !== PUBLIC_KEY_SIZE) throw new SealError('malformed', 'public key size');
  return raw;
}

// fingerprint: the first 16 bytes of the SHA-256 of the public key's bytes,
// base64url (22 characters).
export async function fingerprint(publicKey) {
  const sum = new Uint8Array(await subtle.digest('SHA-256', publicKey));
  return b64encode(sum.subarray(0, FINGERPRINT_SIZE));
}

// ---- session keys, Seal and Open ----

const AD_LABEL = utf8.encode('ccrelay/seal/v1');

// adBytes: "ccrelay/seal/v1" 0x00 | version | direction | len(session) |
// session | len(id) | id, each length one byte; version is that of the
// value (VERSION, or VERSION_EPOCH under a later epoch).
export function adBytes({ session, id, direction }, version = VERSION) {
  if (direction !== FROM_MACHINE && direction !== FROM_DEVICE) throw new SealError('argument', 'bad direction');
  const s = utf8.encode(session || '');
  const i = utf8.encode(id || '');
  if (s.length === 0 || s.length > MAX_AD_FIELD_BYTES) throw new SealError('argument', 'bad session id');
  if (i.length === 0 || i.length > MAX_AD_FIELD_BYTES) throw new SealError('argument', 'bad id');
  return concat(AD_LABEL, new Uint8Array([0, version, direction, s.length]), s, new Uint8Array([i.length]), i);
}

// importSessionKey makes a non-extractable AES-256-GCM key of 32 bytes.
export function importSessionKey(raw) {
  if (raw.length !== KEY_SIZE) throw new SealError('argument', 'session key size');
  return subtle.importKey('raw', raw, 'AES-GCM', false, ['encrypt', 'decrypt']);
}

// seal seals plaintext (bytes or a string, as UTF-8) for ad = { session,
// id, direction } and returns the text form: base64url of version | nonce |
// ciphertext | tag, or, under a later epoch of the session's key,
// VERSION_EPOCH | epoch (2 bytes, big-endian) | nonce | ciphertext | tag.
export async function seal(key, ad, plaintext, epoch = 0) {
  const pt = bytes(plaintext);
  if (pt.length > MAX_PLAINTEXT_BYTES) throw new SealError('argument', 'too large to seal');
  if (!Number.isInteger(epoch) || epoch < 0 || epoch >= MAX_EPOCHS) throw new SealError('argument', 'bad epoch');
  const nonce = crypto.getRandomValues(new Uint8Array(NONCE_SIZE));
  const version = epoch > 0 ? VERSION_EPOCH : VERSION;
  const head = epoch > 0 ? new Uint8Array([version, epoch >> 8, epoch & 0xff]) : new Uint8Array([version]);
  const ct = await subtle.encrypt({ name: 'AES-GCM', iv: nonce, additionalData: adBytes(ad, version) }, key, pt);
  return b64encode(concat(head, nonce, new Uint8Array(ct)));
}

// open opens the text form made by seal (here or in Go) for the same ad;
// it throws a SealError whose code says why it does not. key is the
// session's key, or the list of its keys by epoch (the value says which).
export async function open(key, ad, text) {
  if (typeof text !== 'string' || text.length > MAX_SEALED_CHARS) throw new SealError('malformed', 'sealed value too long');
  const raw = b64decode(text);
  if (raw.length < OVERHEAD) throw new SealError('malformed', 'sealed value too short');
  let head = 1;
  let epoch = 0;
  if (raw[0] === VERSION_EPOCH) {
    if (raw.length < OVERHEAD_EPOCH) throw new SealError('malformed', 'sealed value too short');
    epoch = (raw[1] << 8) | raw[2];
    if (epoch === 0 || epoch >= MAX_EPOCHS) throw new SealError('malformed', 'bad epoch');
    head = 3;
  } else if (raw[0] !== VERSION) throw new SealError('version', `unknown version ${raw[0]}`);
  if (Array.isArray(key)) {
    if (!key[epoch]) throw new SealError('open', `sealed under the session's key of epoch ${epoch}, which this device was not given`);
    key = key[epoch];
  }
  const adb = adBytes(ad, raw[0]);
  try {
    const pt = await subtle.decrypt({ name: 'AES-GCM', iv: raw.subarray(head, head + NONCE_SIZE), additionalData: adb }, key, raw.subarray(head + NONCE_SIZE));
    return new Uint8Array(pt);
  } catch {
    throw new SealError('open', 'authentication failed');
  }
}

// openText opens a sealed UTF-8 string.
export async function openText(key, ad, text) {
  return new TextDecoder('utf-8', { fatal: true }).decode(await open(key, ad, text));
}

// ---- device keys ----

// generateDeviceKey makes a device key pair: a non-extractable private
// CryptoKey and the public key's 32 bytes.
export async function generateDeviceKey() {
  const kp = await subtle.generateKey({ name: 'X25519' }, false, ['deriveBits']);
  return { privateKey: kp.privateKey, publicKey: await publicRaw(kp.publicKey) };
}

const DB_NAME = 'ccrelay-keys';
const DB_STORE = 'keys';

function idb(request) {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

async function openKeyDB() {
  const req = indexedDB.open(DB_NAME, 1);
  req.onupgradeneeded = () => req.result.createObjectStore(DB_STORE);
  return idb(req);
}

// loadOrCreateDeviceKey returns this browser's device key pair under name,
// making and storing it (the CryptoKey itself, which stays
// non-extractable) the first time. created says which.
export async function loadOrCreateDeviceKey(name = 'device') {
  const db = await openKeyDB();
  try {
    const found = await idb(db.transaction(DB_STORE).objectStore(DB_STORE).get(name));
    if (found) return { ...found, created: false };
    const key = await generateDeviceKey();
    const tx = db.transaction(DB_STORE, 'readwrite');
    // add, not put: a key made at the same time in another tab wins.
    try {
      await idb(tx.objectStore(DB_STORE).add(key, name));
    } catch (e) {
      if (e && e.name === 'ConstraintError') {
        const other = await idb(db.transaction(DB_STORE).objectStore(DB_STORE).get(name));
        return { ...other, created: false };
      }
      throw e;
    }
    return { ...key, created: true };
  } finally {
    db.close();
  }
}

// deleteDeviceKey forgets the device key (on unpairing).
export async function deleteDeviceKey(name = 'device') {
  const db = await openKeyDB();
  try {
    await idb(db.transaction(DB_STORE, 'readwrite').objectStore(DB_STORE).delete(name));
  } finally {
    db.close();
  }
}

// ---- unwrapping session keys ----

const WRAP_INFO = utf8.encode('ccrelay/session-key/v1\0');
const WRAP_INFO_EPOCHS = utf8.encode('ccrelay/session-key/v2\0');
const WRAP_AUTH = utf8.encode('ccrelay/wrap-auth/v1');

export const wrapInfo = (session) => concat(WRAP_INFO, utf8.encode(session));
export const wrapInfoEpochs = (session) => concat(WRAP_INFO_EPOCHS, utf8.encode(session));

async function wrapTagKey(privateKey, peer) {
  return hkdf(await dh(privateKey, peer), EMPTY, WRAP_AUTH, 32);
}

// unwrapKeys opens the session keys, epoch 0 first, that the machine
// (machinePublic, its 32 bytes, known from pairing) wrapped for this device
// ({ privateKey, publicKey }), and returns them as non-extractable AES-GCM
// CryptoKeys. A wrapped key of VERSION holds one key; one of VERSION_EPOCH
// holds the session's keys of every epoch (its key was replaced when a
// device was revoked). It checks the machine's tag first: the relay,
// knowing only public keys, cannot make one.
export async function unwrapKeys(device, machinePublic, session, wrapped) {
  if (typeof wrapped !== 'string' || wrapped.length > Math.ceil(MAX_WRAPPED_SIZE * 4 / 3)) throw new SealError('malformed', 'wrapped key');
  const raw = b64decode(wrapped);
  let version = raw[0];
  if (version === VERSION) {
    if (raw.length !== WRAPPED_SIZE) throw new SealError('malformed', 'wrapped key size');
  } else if (version === VERSION_EPOCH) {
    if (raw.length < WRAPPED_SIZE + KEY_SIZE || (raw.length - WRAPPED_SIZE) % KEY_SIZE !== 0 || raw.length > MAX_WRAPPED_SIZE) throw new SealError('malformed', 'wrapped key size');
  } else throw new SealError('version', `unknown version ${raw[0]}`);
  const s = utf8.encode(session || '');
  if (s.length === 0 || s.length > MAX_AD_FIELD_BYTES) throw new SealError('argument', 'bad session id');
  const body = raw.subarray(1, raw.length - 32);
  const tag = raw.subarray(raw.length - 32);
  const msg = concat(WRAP_AUTH, new Uint8Array([0, version]), u16(s.length), s, machinePublic, device.publicKey, body);
  let ok = false;
  try {
    const k = await hmacKey(await wrapTagKey(device.privateKey, machinePublic), ['verify']);
    ok = await subtle.verify('HMAC', k, tag, msg);
  } catch {
    ok = false;
  }
  if (!ok) throw new SealError('unwrap', 'wrapped key does not open: not from the paired machine, or not for this session');
  let keyBytes;
  try {
    const info = version === VERSION ? wrapInfo(session) : wrapInfoEpochs(session);
    const ctx = await hpke.setupR(body.subarray(0, 32), device.privateKey, device.publicKey, info, AEAD_AES256GCM);
    keyBytes = await ctx.open(EMPTY, body.subarray(32));
  } catch {
    throw new SealError('unwrap', 'wrapped key does not open');
  }
  try {
    const keys = [];
    for (let i = 0; i < keyBytes.length; i += KEY_SIZE) keys.push(await importSessionKey(keyBytes.subarray(i, i + KEY_SIZE)));
    return keys;
  } finally {
    keyBytes.fill(0);
  }
}

// unwrapKey opens a wrapped key of one session key (VERSION) for this
// device; see unwrapKeys.
export async function unwrapKey(device, machinePublic, session, wrapped) {
  if (typeof wrapped !== 'string') throw new SealError('malformed', 'wrapped key');
  const raw = b64decode(wrapped);
  if (raw.length !== WRAPPED_SIZE) throw new SealError('malformed', 'wrapped key size');
  if (raw[0] !== VERSION) throw new SealError('version', `unknown version ${raw[0]}`);
  return (await unwrapKeys(device, machinePublic, session, wrapped))[0];
}

// ---- pairing ----

const PAIR_REDEEM = utf8.encode('ccrelay/pair/redeem/v1');
const PAIR_CONFIRM = utf8.encode('ccrelay/pair/confirm/v1');

// pairingKeys derives from the QR's one-time secret the token the relay may
// see and the confirmation key (an HMAC CryptoKey) it never does.
export async function pairingKeys(secret) {
  const raw = b64decode(secret);
  if (raw.length !== PAIRING_SECRET_SIZE) throw new SealError('malformed', 'pairing secret size');
  const prk = await extract(EMPTY, raw);
  const redeem = b64encode(await expand(prk, PAIR_REDEEM, 16));
  const confirmRaw = await expand(prk, PAIR_CONFIRM, 32);
  const confirm = await hmacKey(confirmRaw, ['sign', 'verify']);
  confirmRaw.fill(0);
  return { redeem, confirm };
}

const confirmMessage = (role, machine, device) => concat(PAIR_CONFIRM, new Uint8Array([0, role]), machine, device);

// confirmTag is one side's confirmation of both public keys (32 bytes each).
export async function confirmTag(confirm, role, machine, device) {
  return b64encode(new Uint8Array(await subtle.sign('HMAC', confirm, confirmMessage(role, machine, device))));
}

// checkConfirm checks the other side's confirmation; it throws a
// SealError('confirm') if the public keys were changed on the way.
export async function checkConfirm(confirm, role, machine, device, tag) {
  let ok = false;
  try {
    ok = await subtle.verify('HMAC', confirm, b64decode(tag), confirmMessage(role, machine, device));
  } catch {
    ok = false;
  }
  if (!ok) throw new SealError('confirm', 'pairing confirmation does not match: the public keys were changed on the way');
}
