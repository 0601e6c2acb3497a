// End-to-end encryption in the app (docs/security.md, "Wiring: how sealed
// content travels"). A session this device was given a key for arrives
// sealed: its envelopes, its summary, its live text and its blobs are
// opened here, before anything else sees them, and the commands sent to it
// are sealed here. The key of each session comes from the relay wrapped
// for this device by the machine that owns the session; it opens only with
// this device's private key (non-extractable, in IndexedDB) and a machine
// key this device learnt at pairing, never one the relay names alone.

import * as S from '../seal.js';

/** MACHINES is where the machines this device paired with are kept: [{publicKey, fingerprint}] (base64url). */
export const MACHINES = 'ccrelay.machines';
/** KEY_WAIT_MS bounds the wait for a session's key that the relay was asked for. */
export const KEY_WAIT_MS = 10000;
/** MAX_MACHINES bounds the machines kept (the relay's MaxCredentials). */
export const MAX_MACHINES = 256;

/** SealedError is a sealed value that cannot be shown; its message says why. */
export class SealedError extends Error {}

export function knownMachines() {
  try {
    const l = JSON.parse(localStorage.getItem(MACHINES) || '[]');
    return Array.isArray(l) ? l.filter((m) => m && typeof m.publicKey === 'string') : [];
  } catch {
    return [];
  }
}

/** rememberMachine keeps a machine key learnt at pairing (base64url). */
export async function rememberMachine(publicKey) {
  const list = knownMachines().filter((m) => m.publicKey !== publicKey);
  list.push({ publicKey, fingerprint: await S.fingerprint(S.b64decode(publicKey)) });
  localStorage.setItem(MACHINES, JSON.stringify(list.slice(-MAX_MACHINES)));
}

let devicePromise = null;
/** device is this browser's key pair, made once. */
export function device() {
  devicePromise ??= S.loadOrCreateDeviceKey();
  return devicePromise;
}

const keys = new Map(); // session -> [CryptoKey], its keys by epoch (the last is current)
const keyless = new Set(); // sessions the relay has no key of for this device
const waiting = new Map(); // session -> [resolve]
const sealedIDs = new Set(); // envelopes that came sealed (their blobs are sealed too)
const sealedSince = new Map(); // session -> the seq of its first sealed envelope
const sealedSessions = new Set(); // sessions known to be end-to-end encrypted (any sign of it)
const keyMachine = new Map(); // session -> the public key of the machine that wrapped its key
const claims = new Map(); // session -> the machine name a plaintext session's summary names
const plainAllowed = new Set(); // plaintext sessions the person chose to send to anyway (this page's life)
const locked = new Set(); // sessions shown without their key (a summary or an envelope that did not open for want of it)
const unwrapping = new Map(); // session -> a key being opened (resolves to it, or null)
const wrappedAs = new Map(); // session -> {wrapped, machine}: what its key in keys was opened from
let ask = null; // (session) => sends a session-key request
let onKey = null; // (session, late) => the page reads again what it could not open

/** setAsk gives the module the way to ask the relay for a session's key. */
export function setAsk(fn) { ask = fn; }

/**
 * setOnKey gives the module the way to tell the page that a session's key
 * arrived; late: the session was said to have no key here before (a device
 * trusted while it runs), so what was shown locked can open now.
 */
export function setOnKey(fn) { onKey = fn; }

/**
 * retryKeyless forgets which sessions the relay had no key of for this
 * device: on a new connection they are asked again (a key may have come
 * while the app was between connections, and it is pushed only once).
 */
export function retryKeyless() { keyless.clear(); }

/** keyFor is a session's keys by epoch (the last one current), if this device has them. */
export function keyFor(session) { return keys.get(session); }

function settle(session, key) {
  const ws = waiting.get(session) || [];
  waiting.delete(session);
  for (const w of ws) w(key);
}

/** waitKey resolves to the session's key, asking the relay once; null if it has none for this device. */
function waitKey(session) {
  if (keys.has(session)) return Promise.resolve(keys.get(session));
  // A key that came (before what it opens) and is being opened.
  if (unwrapping.has(session)) return unwrapping.get(session);
  if (keyless.has(session)) return Promise.resolve(null);
  return new Promise((resolve) => {
    const first = !waiting.has(session);
    const list = waiting.get(session) || [];
    list.push(resolve);
    waiting.set(session, list);
    if (first) {
      ask?.(session);
      setTimeout(() => { if (waiting.has(session)) { keyless.add(session); settle(session, null); } }, KEY_WAIT_MS);
    }
  });
}

/**
 * takeSessionKey opens a session-key frame; it throws a SealedError if the
 * key is not from a known machine. What waits for the session's key from
 * now on waits for this one to open.
 */
export function takeSessionKey(f) {
  const p = openSessionKey(f);
  if (typeof f.session !== 'string') return p;
  const late = keyless.has(f.session) || locked.has(f.session);
  const opened = p.then((k) => k, () => null);
  unwrapping.set(f.session, opened);
  opened.then((k) => {
    if (unwrapping.get(f.session) === opened) unwrapping.delete(f.session);
    if (k) { locked.delete(f.session); onKey?.(f.session, late); }
  });
  return p;
}

async function openSessionKey(f) {
  if (typeof f.session !== 'string' || typeof f.wrapped !== 'string' || typeof f.machine !== 'string') throw new SealedError('a session key frame without its fields');
  // A key for this device, even one that does not open, says the session
  // is sealed: it gets no plaintext.
  sealedSessions.add(f.session);
  if (!knownMachines().some((m) => m.publicKey === f.machine)) {
    keyless.add(f.session);
    settle(f.session, null);
    throw new SealedError('a session key from a machine this device did not pair with: ignored');
  }
  // The same wrapped key again (asked ahead, then given with the
  // subscription): nothing new to open.
  const had = wrappedAs.get(f.session);
  if (keys.has(f.session) && had && had.wrapped === f.wrapped && had.machine === f.machine) return keys.get(f.session);
  let key;
  try {
    key = await S.unwrapKeys(await device(), S.b64decode(f.machine), f.session, f.wrapped);
  } catch (e) {
    keyless.add(f.session);
    settle(f.session, null);
    throw new SealedError('a session key that does not open (' + (e.message || e) + ')');
  }
  keys.set(f.session, key);
  wrappedAs.set(f.session, { wrapped: f.wrapped, machine: f.machine });
  if (!performance.getEntriesByName('ccrelay:first-key').length) performance.mark('ccrelay:first-key');
  sealedSessions.add(f.session);
  keyMachine.set(f.session, f.machine);
  keyless.delete(f.session);
  settle(f.session, key);
  return key;
}

const noKey = 'this session is end-to-end encrypted and this device has no key for it: pair it with the machine that runs the session (ccrelay pair on that machine)';

/** openEnvelope returns a stored envelope as the model reads it: sealed ones opened and checked against their readable fields. */
export async function openEnvelope(session, env) {
  return (await openLinked(session, env)).envelope;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** openLinked is openEnvelope that also returns the sealed chain link the envelope carried ({n, prev}), if any. */
async function openLinked(session, env) {
  if (!env || typeof env !== 'object' || typeof env.sealed !== 'string') return { envelope: env };
  const key = await waitKey(session);
  if (!key) { locked.add(session); throw new SealedError(noKey); }
  let plain;
  try {
    plain = JSON.parse(utf8.decode(await S.open(key, { session, id: env.id, direction: S.FROM_MACHINE }, env.sealed)));
  } catch {
    throw new SealedError('a sealed envelope that does not open here: changed or moved on the way');
  }
  const ev = plain?.ev || {};
  const same = plain && plain.id === env.id && plain.time === env.time && plain.role === env.role &&
    (plain.turn || '') === (env.turn || '') && (plain.subagent || '') === (env.subagent || '') &&
    ev.t === env.ev?.t && (ev.t !== 'turn-end' || ev.status === env.ev?.status);
  if (!same) throw new SealedError('a sealed envelope whose readable fields do not match it: changed on the way');
  sealedIDs.add(env.id);
  const link = plain.chain;
  if (link !== undefined) plain.chain = undefined; // not delete: the object keeps its shape (V8), the page reads it as it was
  return { envelope: plain, link: link && Number.isSafeInteger(link.n) && link.n > 0 && typeof link.prev === 'string' ? link : null };
}

// Opening a batch's sealed envelopes is started as soon as the batch
// comes, all of them at once (WebCrypto opens them off the page's thread,
// side by side), while the batches before it are still being shown; what
// depends on their order (the chain, a plaintext envelope after sealed
// ones) is checked afterwards, in order (openFrame).
const opening = new WeakMap(); // batch item -> its envelope being opened ({ok} or {err})

function startOpening(session, it) {
  let p = opening.get(it);
  if (!p) {
    p = openLinked(session, it.envelope).then((ok) => ({ ok }), (err) => ({ err }));
    opening.set(it, p);
  }
  return p;
}

/**
 * prepareFrame starts opening what a frame carries sealed, before the
 * frames ahead of it are through openFrame (which then takes what was
 * opened). It changes nothing that openFrame's order decides.
 */
export function prepareFrame(f) {
  if (!f || f.type !== 'batch' || !Array.isArray(f.items) || typeof f.session !== 'string') return;
  for (const it of f.items) {
    if (it && typeof it === 'object' && it.envelope && typeof it.envelope.sealed === 'string') startOpening(f.session, it);
  }
}

/**
 * prefetchKey asks for a session's key ahead of need (the session a page
 * opens on, as the connection opens), so that it does not wait for the
 * list first. Only on a device paired with machines; a plaintext session
 * is answered no-key, which changes nothing.
 */
export function prefetchKey(session) {
  if (typeof session !== 'string' || !knownMachines().length || keys.has(session) || waiting.has(session) || unwrapping.has(session)) return;
  waitKey(session);
}

// A session's chain as this page follows it (the envelopes it reads from
// the relay, forward in seq order): end, the last sealed envelope seen
// ({seq, id, n}); ids, the ids of those seen; start, the first one seen
// ({seq, id, n, prev}), where a part read before it (earlierChain) must end.
const chains = new Map(); // session -> {end, ids, start}

function chainOf(session) {
  let c = chains.get(session);
  if (!c) chains.set(session, (c = { end: null, ids: new Set(), start: null }));
  return c;
}

/**
 * earlierChain is the chain of the part of a session read apart, up to seq
 * until, before the part this page opened on (the earlier envelopes of a
 * long session, read after its end was shown): openFrame(f, chain) checks
 * the part's envelopes against one another, and joinChain where it meets
 * the rest. Envelopes after until are not the part's.
 */
export function earlierChain(until) { return { end: null, ids: new Set(), start: null, until }; }

/**
 * checkChain follows a session's sealed chain (docs/security.md, "Withheld
 * envelopes"): each sealed envelope names, sealed, its count and the id of
 * the one the machine sealed before it. Going forward in seq order, an
 * envelope that does not follow the last one seen says that the relay
 * withheld some (how many: the counts' gap), reordered them, or sent one
 * again. It returns {withheld: n, message} for a break, or null.
 */
function checkChain(c, seq, id, link) {
  if (!link || !Number.isFinite(seq)) return null; // sealed before chains
  if (seq > c.until) return null; // after the part
  const last = c.end;
  let brk = null;
  if (last && seq > last.seq) {
    if (c.ids.has(id)) {
      // Sent again: the chain goes on from where it was.
      return { withheld: 0, message: 'The relay sent an envelope of this session again, out of its place.' };
    } else if (link.prev !== last.id) brk = chainBreak(link.n - last.n - 1);
  }
  if (!c.start) c.start = { seq, id, n: link.n, prev: link.prev };
  if (!last || seq > last.seq) c.end = { seq, id, n: link.n };
  c.ids.add(id);
  return brk;
}

function chainBreak(n) {
  return n > 0
    ? { withheld: n, message: (n === 1 ? '1 envelope was' : n + ' envelopes were') + ' withheld by the relay here: the machine sealed ' + (n === 1 ? 'it' : 'them') + ', the relay did not pass ' + (n === 1 ? 'it' : 'them') + ' on. What is shown is not all of the session.' }
    : { withheld: 0, message: 'The relay passed this session\'s envelopes on out of their order: what is shown here is not in the order the machine sealed it.' };
}

/**
 * joinChain checks that a part read apart (earlierChain) ends where the
 * session's chain as the page first read it starts: its last envelope is
 * the one the first envelope after it names. It returns {withheld: n,
 * message} for a break there, or null.
 */
export function joinChain(session, part) {
  const start = chains.get(session)?.start;
  const end = part?.end;
  if (!start || !end || start.seq !== part.until + 1) return null;
  if (start.prev === end.id) return null;
  if (part.ids.has(start.id)) return { withheld: 0, message: 'The relay sent an envelope of this session again, out of its place.' };
  return chainBreak(start.n - end.n - 1);
}

const announcedEnd = new Map(); // session -> {n, last}: where its chain stood when its machine announced it (sealed summary), the furthest seen

/** TAIL_GRACE_MS is how long envelopes the machine's summary counts may be late (on their way from the relay) before the page says they were withheld. */
export const TAIL_GRACE_MS = 2000;

/**
 * tailWithheld says whether the relay withheld envelopes at the end of a
 * session, where no later envelope names them: the machine's sealed
 * summary counts the envelopes it had sealed (and the relay had taken)
 * when it announced the session; fewer came here, after the last one
 * shown. It returns {withheld: n, message}, or null. The relay can show
 * an older summary (it then hides fewer), never one that counts less
 * than one shown before.
 */
export function tailWithheld(session) {
  const end = announcedEnd.get(session);
  if (!end) return null;
  const seen = chains.get(session)?.end?.n || 0;
  if (seen >= end.n) return null;
  const n = end.n - seen;
  return { withheld: n, message: (n === 1 ? '1 envelope' : n + ' envelopes') + ' at the end of this session ' + (n === 1 ? 'was' : 'were') +
    ' withheld by the relay: the machine sealed ' + (n === 1 ? 'it' : 'them') + ' and the relay took ' + (n === 1 ? 'it' : 'them') + ', but did not pass ' + (n === 1 ? 'it' : 'them') + ' on. What is shown is not all of the session.' };
}

/** learnEnd keeps where a session's chain stood as its sealed summary says (chainEnd), the furthest seen. */
function learnEnd(session, c) {
  if (!c || !Number.isSafeInteger(c.n) || c.n <= 0 || typeof c.last !== 'string') return;
  const was = announcedEnd.get(session);
  if (!was || c.n > was.n) announcedEnd.set(session, { n: c.n, last: c.last });
}

/**
 * skipChain moves a session's chain past a sealed envelope that did not
 * open (already shown as a note): if it was in its place, the next one
 * names it.
 */
function skipChain(c, seq, id) {
  const last = c.end;
  if (!last || !Number.isFinite(seq) || seq <= last.seq || seq > c.until || typeof id !== 'string') return;
  c.end = { seq, id, n: last.n + 1 };
}

/**
 * openInfo opens a sealed session summary (its readable fields kept where the sealed part says nothing).
 * The relay's mark of a session whose ccrelay is gone (cliGone, and its reason as error) wins over what the machine said last.
 */
export async function openInfo(session, info) {
  if (!info || typeof info.sealed !== 'string') return info;
  sealedSessions.add(session);
  const key = await waitKey(session);
  if (!key) { locked.add(session); return { ...info, sealed: undefined, locked: true, e2e: true }; }
  try {
    const inner = JSON.parse(await S.openText(key, { session, id: 'announce', direction: S.FROM_MACHINE }, info.sealed));
    // An idle session marked keeps the error it had (the readable one is
    // only a digest of the sealed one's).
    const gone = !Number.isFinite(info.cliGone) ? {} : {
      cliGone: info.cliGone, cliStopped: info.cliStopped,
      ...(typeof info.error === 'string' && !info.error.startsWith('sealed:') ? { error: info.error } : {}),
    };
    if (inner && typeof inner.machine === 'string') learnMachineName(keyMachine.get(session), inner.machine);
    learnEnd(session, inner?.chainEnd);
    return { ...inner, status: info.status ?? inner.status, mode: info.mode ?? inner.mode, sealed: undefined, ...gone, e2e: true };
  } catch {
    return { ...info, sealed: undefined, locked: true, e2e: true };
  }
}

/**
 * openFrame opens what a frame carries sealed; null for frames this module
 * consumes. chain: the chain a batch's envelopes follow, if not the
 * session's (earlierChain).
 */
export async function openFrame(f, chain) {
  if (f.type === 'session-key') {
    try { await takeSessionKey(f); } catch (e) { return { type: 'e2e-note', message: e.message }; }
    return null;
  }
  if (f.type === 'error' && (f.code === 'no-key' || (f.code === 'not-found' && waiting.has(f.session)))) {
    keyless.add(f.session);
    settle(f.session, null);
    return f.code === 'no-key' ? null : f;
  }
  if (f.type === 'batch' && Array.isArray(f.items) && typeof f.session === 'string') {
    prepareFrame(f);
    const c = chain || chainOf(f.session);
    const items = [];
    for (const it of f.items) {
      if (!it || typeof it !== 'object' || !it.envelope) { items.push(it); continue; }
      if (typeof it.envelope.sealed !== 'string') {
        // A session sealed from some point on stays sealed: a plaintext
        // envelope after it can only come from the relay.
        const since = sealedSince.get(f.session);
        if (since !== undefined && Number.isFinite(it.seq) && it.seq > since) {
          items.push({ seq: it.seq, unreadable: 'a plaintext envelope in an end-to-end encrypted session: refused (it cannot come from the machine)' });
        } else items.push(it);
        continue;
      }
      sealedSessions.add(f.session);
      if (Number.isFinite(it.seq) && !(sealedSince.get(f.session) <= it.seq)) sealedSince.set(f.session, it.seq);
      const { ok, err } = await startOpening(f.session, it);
      if (ok) {
        const { envelope, link } = ok;
        const brk = checkChain(c, it.seq, envelope.id, link);
        if (brk) items.push({ seq: it.seq, chainBreak: true, withheld: brk.withheld, unreadable: brk.message });
        items.push({ ...it, envelope });
      } else {
        skipChain(c, it.seq, it.envelope.id);
        items.push({ seq: it.seq, unreadable: err instanceof SealedError ? err.message : 'a sealed envelope it could not open' });
      }
    }
    return { ...f, items };
  }
  if (f.type === 'live' && keyFor(f.session) && !(f.payload && typeof f.payload.sealed === 'string')) return null; // not from the machine
  if (f.type === 'live' && f.payload && typeof f.payload.sealed === 'string') {
    if (typeof f.session === 'string') sealedSessions.add(f.session);
    const key = keyFor(f.session);
    if (!key) return null; // a typing preview: the envelopes follow
    try {
      return { ...f, payload: JSON.parse(await S.openText(key, { session: f.session, id: 'live', direction: S.FROM_MACHINE }, f.payload.sealed)) };
    } catch {
      return null;
    }
  }
  if (f.type === 'command-status' && typeof f.sealedMessage === 'string') return openResult(f);
  if (f.type === 'command-status' && typeof f.message === 'string' && f.message && typeof f.session === 'string' && (keyFor(f.session) || sealedSessions.has(f.session))) {
    // A sealed session's machine seals its reasons: a readable one is the
    // relay's (no CLI connected, too many prompts waiting), or made up by
    // it, and is said to be.
    // The machine's neutral text without its sealed reason: the relay
    // left the reason out.
    if (f.message === SEALED_RESULT_MESSAGE) return { ...f, message: RESULT_WITHHELD };
    return { ...f, message: RESULT_FROM_RELAY + f.message };
  }
  if ((f.type === 'sessions' || f.type === 'session') && Array.isArray(f.sessions)) {
    for (const s of f.sessions) {
      if (s && typeof s.id === 'string' && s.info && typeof s.info === 'object' && typeof s.info.sealed !== 'string') {
        claims.set(s.id, typeof s.info.machine === 'string' ? s.info.machine : '');
      }
    }
    const sessions = await Promise.all(f.sessions.map(async (s) => (s && s.info && typeof s.info.sealed === 'string' && typeof s.id === 'string'
      ? { ...s, info: await openInfo(s.id, s.info) } : s)));
    return { ...f, sessions };
  }
  return f;
}

/** RESULT_NO_KEY is what a command's status says in place of a reason the machine sealed that this device cannot open. */
export const RESULT_NO_KEY = 'the machine\'s reason is end-to-end encrypted, and this device has no key to read it';
/** SEALED_RESULT_MESSAGE is the neutral text a machine puts beside a sealed reason (protocol.SealedResultMessage). */
const SEALED_RESULT_MESSAGE = 'the machine\'s reason is end-to-end encrypted; open this session on a device that has its key to read it';
/** RESULT_WITHHELD is what a status says that carries the machine's neutral text without the sealed reason beside it. */
export const RESULT_WITHHELD = 'the machine\'s reason is end-to-end encrypted, and the relay passed on none to open here';
/** RESULT_FROM_RELAY starts a sealed session's command reason that came readable: the relay wrote it (or an older ccrelay that does not seal reasons), not the machine under the session's key. */
export const RESULT_FROM_RELAY = 'the relay says (not sealed by the machine): ';
/** RESULT_NOT_OPENED is what it says when the sealed reason does not open under the key this device has. */
export const RESULT_NOT_OPENED = 'the machine\'s reason is end-to-end encrypted, and it did not open here (sealed under a key this device was not given, or changed on the way)';

/**
 * openResult opens the reason of a command's status that the machine
 * sealed (for the session, the command's id + "/result", from the
 * machine): message becomes what the machine said, or, without the key,
 * a neutral text. Never a failure: the status stands either way.
 */
async function openResult(f) {
  const id = f.command?.id;
  if (typeof f.session !== 'string' || typeof id !== 'string') return { ...f, sealedMessage: undefined, message: RESULT_NO_KEY };
  sealedSessions.add(f.session);
  // A command sent to a sealed session was sealed here: its key is here,
  // or being opened.
  const key = keyFor(f.session) ?? (unwrapping.has(f.session) ? await unwrapping.get(f.session) : null);
  if (!key) return { ...f, sealedMessage: undefined, message: RESULT_NO_KEY };
  // The machine seals its answer under its current key, never one older
  // than the key this device sealed the command under (it takes commands
  // under its current key only): an older key's could only come from a
  // device revoked since, which holds it, through the relay.
  const least = commandEpochs.get(id) ?? 0;
  if (least > 0 && sealedEpoch(f.sealedMessage) < least) return { ...f, sealedMessage: undefined, message: RESULT_OLD_KEY };
  try {
    const message = await S.openText(key, { session: f.session, id: id + '/result', direction: S.FROM_MACHINE }, f.sealedMessage);
    return { ...f, sealedMessage: undefined, message };
  } catch {
    return { ...f, sealedMessage: undefined, message: RESULT_NOT_OPENED };
  }
}

/** RESULT_OLD_KEY is what a command's status says in place of a reason sealed under a key older than the command's. */
export const RESULT_OLD_KEY = 'a reason sealed under an older key of the session than the command: not from the machine (a device revoked since holds that key), so not shown';

// commandEpochs: the key epoch each command this device sealed was sealed
// under (the latest MAX_COMMAND_EPOCHS commands), for openResult.
const commandEpochs = new Map();
const MAX_COMMAND_EPOCHS = 1024;

// sealedEpoch is the key epoch a sealed value's text names (0 for the
// first form, or one that is not readable: open refuses it then).
function sealedEpoch(text) {
  try {
    const head = S.b64decode(text.slice(0, 4));
    return head[0] === S.VERSION_EPOCH ? (head[1] << 8) | head[2] : 0;
  } catch {
    return 0;
  }
}

/** NotSentError is a command this device will not send; its message says
 * why and what to do. confirm: the person may choose to send it unencrypted
 * (allowPlaintext), for a plaintext session of a device paired with machines. */
export class NotSentError extends Error {
  constructor(message, confirm = false) {
    super(message);
    this.confirm = confirm;
  }
}

const noKeySend = 'Not sent: this session is end-to-end encrypted and this device has no key for it, so your message could not be sealed, and nothing left this device. ' +
  'If this device is not paired with the machine that runs the session (or was paired with `ccrelay pair --no-wait` and never confirmed), run `ccrelay pair` on that machine and open its link here. ' +
  'If it is paired, ask that machine to share the session\'s key again: restart ccrelay there, or pair this device again.';

/**
 * knownSealed reports whether the session is known to be end-to-end
 * encrypted: seen sealed on this page, or its summary (as openInfo made
 * it, kept in the saved list too) says so. A summary from the relay that
 * claims it only makes the app refuse plaintext to it.
 */
function knownSealed(session, info = {}) {
  return sealedSessions.has(session) || info?.locked === true || info?.e2e === true;
}

/** learnMachineName keeps what a machine this device paired with calls itself, as its sealed summaries say (they open only under a key it wrapped). */
function learnMachineName(publicKey, name) {
  if (typeof publicKey !== 'string' || !name) return;
  const list = knownMachines();
  const m = list.find((x) => x.publicKey === publicKey);
  if (!m || m.name === name) return;
  m.name = String(name).slice(0, 256);
  localStorage.setItem(MACHINES, JSON.stringify(list));
}

/** sealedBy is the machine that sealed a session's key for this device: {fingerprint, name}, or null. */
export function sealedBy(session) {
  const pub = keyMachine.get(session);
  if (!pub) return null;
  const m = knownMachines().find((x) => x.publicKey === pub);
  return m ? { fingerprint: m.fingerprint || '', name: m.name || '' } : null;
}

/**
 * protection says how a session is protected, as this device can tell:
 * 'sealed' (end-to-end encrypted, this device holds its key), 'locked'
 * (encrypted, no key here), 'plain' (not encrypted, on a device paired
 * with machines), or '' (a device that paired with no machine: the
 * plaintext mode, nothing to compare with).
 */
export function protection(session, info = {}) {
  if (keys.has(session)) return 'sealed';
  if (knownSealed(session, info)) return 'locked';
  return knownMachines().length ? 'plain' : '';
}

/** pairedMachineClaimed is the name of a machine this device paired with that a plaintext session says it runs on, or ''. */
export function pairedMachineClaimed(session, info = {}) {
  const name = typeof info.machine === 'string' && info.machine ? info.machine : claims.get(session) || '';
  if (!name || keys.has(session)) return '';
  return knownMachines().some((m) => m.name === name) ? name : '';
}

/** allowPlaintext records the person's choice to send to a plaintext session unencrypted (for this page's life). */
export function allowPlaintext(session) { plainAllowed.add(session); }

/**
 * sealCommand seals a command to a session this device holds a key of.
 * It never sends plaintext where a key is missing: for a session known to
 * be sealed it waits for the key the relay was asked for, and without one
 * throws a NotSentError. On a device paired with machines, a plaintext
 * session gets a command only after allowPlaintext, and never one that
 * says it runs on a machine this device paired with (that machine seals
 * every session it sends once it trusts a device).
 */
export async function sealCommand(session, cmd, info = {}) {
  info ||= {};
  let key = keyFor(session);
  if (!key && knownSealed(session, info)) key = await waitKey(session);
  if (!key && knownSealed(session, info)) throw new NotSentError(noKeySend);
  if (!key) {
    if (!knownMachines().length) return cmd;
    const claimed = pairedMachineClaimed(session, info);
    if (claimed) {
      throw new NotSentError('Not sent: this session is not end-to-end encrypted, yet it says it runs on ' + claimed +
        ', a machine this device paired with, which encrypts every session it sends. It may not come from that machine (the relay can make up sessions). Nothing left this device.');
    }
    if (!plainAllowed.has(session)) {
      throw new NotSentError('This session is not end-to-end encrypted: whoever runs the relay can read what you send to it, and nothing shows it comes from a machine this device paired with. Send it unencrypted only if you trust the relay.', true);
    }
    return cmd;
  }
  // Under the session's current key: the machine refuses a command under
  // a key it replaced when a device was revoked.
  const sealed = await S.seal(key[key.length - 1], { session, id: cmd.id, direction: S.FROM_DEVICE }, JSON.stringify(cmd), key.length - 1);
  commandEpochs.set(cmd.id, key.length - 1);
  if (commandEpochs.size > MAX_COMMAND_EPOCHS) commandEpochs.delete(commandEpochs.keys().next().value);
  return { id: cmd.id, kind: cmd.kind, sealed };
}

/** openBlob opens a blob (standard base64) of an envelope that came sealed; others are returned as they are. */
export async function openBlob(session, envID, b64) {
  if (!sealedIDs.has(envID)) return b64;
  const key = keyFor(session);
  if (!key) throw new SealedError(noKey);
  const url = b64.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  let bytes;
  try {
    bytes = await S.open(key, { session, id: envID + '/blob', direction: S.FROM_MACHINE }, url);
  } catch {
    throw new SealedError('a sealed blob that does not open here: changed on the way');
  }
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}
