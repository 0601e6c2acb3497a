// The app's link to the relay: one websocket at a time, authenticated by the
// "ccrelay-token.<token>" subprotocol (never the URL). It knows when the
// link is dead (the relay sends a heartbeat every 5 s; a visible socket
// silent for longer than TIMING.silence is closed), tells an unreachable
// relay from a refused credential (GET /status), and reconnects by itself:
// after a connect timeout, with capped backoff and jitter, and at once when
// the network comes back or changes or the page becomes visible. On every
// (re)connection it lists sessions and subscribes again from the last
// sequence number the caller saw, so nothing is missed or shown twice.

const V = 1;

// A subscription whose connection dies this many times in a row right
// after subscribing, before any of its frames arrived, is stuck on a frame
// the browser cannot read (a text frame that is not UTF-8 fails the whole
// connection): the caller is told, to skip past it.
export const STUCK_TRIES = 3;
/** BLOB_TIMEOUT_MS: how long fetchBlob waits for the relay's answer. */
export const BLOB_TIMEOUT_MS = 30000;
// "Right after": within this many milliseconds of subscribing.
export const STUCK_WINDOW_MS = 3000;
// A subscribe the relay answers busy (too many reads of history under way
// on the connection) is sent again after a backoff (busyDelay); after this
// many busy answers in a row the connection is replaced by a fresh one,
// which has no reads under way.
export const BUSY_TRIES = 6;

/**
 * busyDelay is how long to wait before sending again a subscribe answered
 * busy for the tries-th time in a row (from 0): timing.backoffMin, doubling
 * to at most timing.backoffMax, jittered between half and all of it.
 */
export function busyDelay(tries, timing = TIMING) {
  const base = Math.min(timing.backoffMax, timing.backoffMin * 2 ** Math.min(tries, 16));
  return base / 2 + Math.random() * base / 2;
}

// Timing of the link, in milliseconds. The defaults are what users get
// (docs/protocol.md, "Liveness and status"); a test may
// override any of them in the app's URL fragment: #…&timing=connect:2000,silence:3000.
export const TIMING = {
  // A visible, open socket with no frame for this long is dead: the relay
  // sends a heartbeat every 5 s. The app says "Offline — reconnecting",
  // closes it and connects again.
  silence: 15000,
  // How often a visible, open socket's silence is checked.
  check: 1000,
  // On becoming visible, a socket silent for this long is replaced at once.
  stale: 7000,
  // A websocket not open within this is abandoned and tried again.
  connect: 10000,
  // When the network returns (online, a network change, the page visible
  // again), an attempt still connecting is replaced by a fresh one, unless
  // it started less than this ago (the events come in bursts: one attempt
  // for all of them).
  fresh: 1000,
  // The status check (GET /status) gives up after this: relay unreachable.
  status: 5000,
  // Retries: the first after backoffMin, doubling to at most backoffMax,
  // each jittered (between half and all of it).
  backoffMin: 400,
  backoffMax: 4000,
  // While the relay refuses the credential, it is checked again this often.
  refusedRetry: 30000,
  // A tab hidden for this long closes its socket (no heartbeats wake the
  // radio); it reconnects and catches up when it is visible again.
  hiddenClose: 60000,
};

/** STATUS_REVOKED is the close code of a websocket whose credential was revoked (relay.StatusRevoked). */
export const STATUS_REVOKED = 4001;

/** isDeviceCredential reports whether token is a credential the relay made for a device (pairing), not the relay's own token. */
export function isDeviceCredential(token) { return /^ccr_[0-9a-f]+$/.test(String(token)); }

// parseTiming reads "name:ms,name:ms" (unknown names and bad values are
// ignored).
export function parseTiming(spec) {
  const t = {};
  for (const kv of String(spec || '').split(',')) {
    const [k, v] = kv.split(':');
    if (Object.hasOwn(TIMING, k) && Number(v) > 0) t[k] = Number(v);
  }
  return t;
}

// States of a Connection:
//   connecting    the first connection is being made
//   open          connected
//   reconnecting  a socket died or could not open; the relay answers (or
//                 has not been asked yet): trying again
//   offline       the relay cannot be reached from here (no answer, or an
//                 error from something in front of it): trying again
//   refused       the relay refused this device's credential (401)
//   limited       the relay refuses this address for a while after failed
//                 logins (429)
//   paused        hidden long enough to close the socket; back when visible
//   revoked       the relay closed the socket for a revoked (or signed out)
//                 credential, or refuses a device credential it no longer
//                 knows: the connection stops for good (nothing to retry)
export class Connection extends EventTarget {
  /**
   * @param {string} token the relay's token
   * @param {{url?: string, base?: string, timing?: object}} [opts]
   */
  constructor(token, opts = {}) {
    super();
    this.token = token;
    this.url = opts.url || (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws/app';
    this.base = opts.base || location.origin;
    this.timing = { ...TIMING, ...(opts.timing || {}) };
    // () => {device, session, visible}: what this page shows, told to the
    // relay on every connection and visibility change (no push to a device
    // for a session it shows visibly).
    this.visibility = opts.visibility || null;
    this.ws = null;
    this.wsStarted = 0; // when this.ws was made (Date.now())
    this.state = 'connecting';
    this.failures = 0; // failed tries in a row (backoff)
    this.attempts = 0; // websockets opened, ever (for people and tests)
    this.timeouts = 0; // of which abandoned after the connect timeout
    this.deaths = 0; // open sockets found silent and closed
    this.timer = null; // the next try
    this.watcher = null; // the silence check
    this.hiddenTimer = null;
    this.paused = false;
    this.checking = null; // a status check under way (a promise)
    this.lastMessage = 0;
    this.subscription = null; // {session, after: () => number}
    this.pending = new Map(); // command id -> command frame, resent on reconnect until answered
    this.blobs = new Map(); // ref -> waiter of fetchBlob
    // open, when set, turns a frame into what the app reads (end-to-end
    // encryption: e2e.openFrame), or null; frames pass through it in order.
    // list: the list frame to send at every (re)connection (app.js
    // pages the list); a whole list when not given.
    this.list = opts.list || null;
    this.open = opts.open || null;
    // prepare, when set, starts on a frame as soon as it comes what open
    // will do with it (opening its sealed envelopes), while the frames
    // ahead of it are still going through open.
    this.prepare = opts.prepare || null;
    this.inbox = Promise.resolve();
    this.stopped = false;
    this.stuck = 0; // connections in a row that died right after subscribing
    this.sent = null; // {ws, session, after, at}: a subscribe sent, until its first frame
    this.busyTimer = null; // the subscribe sent again after a busy answer
    this.busyTries = 0; // busy answers in a row to the subscription's subscribe
    this.busyAnswers = 0; // busy answers, ever (for people and tests)
    this.onOnline = () => this.reconnectNow(false);
    this.onOffline = () => { if (this.state !== 'open') this.setState('offline'); };
    this.onNetwork = () => this.reconnectNow(true);
    this.onVisibility = () => this.visibilityChanged();
    addEventListener('online', this.onOnline);
    addEventListener('offline', this.onOffline);
    navigator.connection?.addEventListener?.('change', this.onNetwork);
    document.addEventListener('visibilitychange', this.onVisibility);
    addEventListener('pageshow', this.onVisibility);
  }

  start() {
    this.connect();
    if (document.visibilityState === 'hidden') this.visibilityChanged();
  }

  connect() {
    clearTimeout(this.timer);
    this.timer = null;
    if (this.stopped || this.paused) return;
    this.attempts++;
    let ws;
    try {
      ws = new WebSocket(this.url + '?heartbeat=1', ['ccrelay-token.' + this.token]);
    } catch (e) {
      this.failed();
      return;
    }
    this.ws = ws;
    this.wsStarted = Date.now();
    if (this.state === 'open') this.setState('reconnecting');
    let opened = false;
    const connectTimer = setTimeout(() => {
      if (this.ws !== ws || ws.readyState !== WebSocket.CONNECTING) return;
      this.timeouts++;
      this.drop();
      this.failed();
    }, this.timing.connect);
    ws.onopen = () => {
      clearTimeout(connectTimer);
      if (this.ws !== ws) return;
      opened = true;
      this.failures = 0;
      this.lastMessage = Date.now();
      this.setState('open');
      this.watch();
      this.send(this.list ? this.list() : { type: 'list' });
      this.sendVisibility();
      if (this.subscription) this.sendSubscribe();
      for (const f of this.pending.values()) this.send(f);
    };
    ws.onmessage = (e) => {
      if (this.ws !== ws) return;
      this.lastMessage = Date.now();
      let f;
      try { f = JSON.parse(e.data); } catch { this.bad('a frame that is not JSON', e.data); return; }
      if (!f || typeof f !== 'object' || Array.isArray(f) || typeof f.type !== 'string') { this.bad('a frame without a type', e.data); return; }
      if (f.v !== V) { this.bad('a frame of protocol version ' + String(f.v).slice(0, 10), e.data); return; }
      if (f.type === 'heartbeat') return;
      if (f.type === 'error' && f.code === 'busy') { this.busy(ws, f); return; }
      if ((f.type === 'blob' || f.type === 'error') && typeof f.ref === 'string' && this.blobs.has(f.ref)) { this.blobAnswer(f); return; }
      if (this.sent && this.sent.ws === ws && f.session === this.sent.session) { this.sent = null; this.stuck = 0; }
      if (f.session && f.session === this.subscription?.session && f.type !== 'error') this.busyTries = 0;
      if (f.type === 'command-status' && f.command && (f.status === 'done' || f.status === 'rejected')) this.pending.delete(f.command.id);
      // Refused by the relay (a plaintext command to a sealed session): never resent.
      if (f.type === 'error' && f.code === 'not-sealed' && f.command) this.pending.delete(f.command.id);
      if (!this.open) { this.dispatchEvent(new CustomEvent('frame', { detail: f })); return; }
      // Sealed frames are opened in the order they came (opening is
      // asynchronous); a session's key is taken at once, outside that
      // order, since opening may wait for it.
      if (f.type === 'session-key' || (f.type === 'error' && f.code === 'no-key')) { this.open(f).then((g) => { if (g) this.dispatchEvent(new CustomEvent('frame', { detail: g })); }); return; }
      this.prepare?.(f);
      this.inbox = this.inbox.then(() => this.open(f)).then((g) => {
        if (g) this.dispatchEvent(new CustomEvent('frame', { detail: g }));
      }, (e) => console.error(e));
    };
    ws.onclose = (e) => {
      clearTimeout(connectTimer);
      if (this.ws !== ws) return;
      if (e.code === STATUS_REVOKED) { this.revoked(); return; }
      this.ws = null;
      const sent = this.sent?.ws === ws ? this.sent : null;
      this.sent = null;
      if (opened && sent && this.subscription?.session === sent.session && Date.now() - sent.at < STUCK_WINDOW_MS) {
        if (++this.stuck >= STUCK_TRIES) {
          this.stuck = 0;
          this.dispatchEvent(new CustomEvent('stuck', { detail: { session: sent.session, after: sent.after } }));
        }
      } else if (opened) {
        this.stuck = 0;
      }
      this.failed();
    };
    ws.onerror = () => {};
  }

  /** drop closes the current socket, whose events are ignored from now on. */
  drop() {
    const w = this.ws;
    this.ws = null;
    this.sent = null;
    clearTimeout(this.busyTimer);
    this.busyTimer = null;
    this.busyTries = 0;
    this.unwatch();
    if (w) w.close();
  }

  /**
   * failed runs when a socket died or could not open: it tries again (with
   * backoff) and meanwhile asks the relay's status, to say why (a refused
   * upgrade and an unreachable relay look alike to a page).
   */
  failed() {
    this.unwatch();
    if (this.stopped || this.paused) return;
    if (this.state === 'open' || this.state === 'connecting') this.setState('reconnecting');
    this.diagnose();
    this.retry();
  }

  /**
   * diagnose asks the relay's status and says what it learnt: a refused
   * credential stops the websocket tries (each would be another failed
   * login) until a later check finds it accepted.
   */
  async diagnose() {
    if (this.checking) return;
    this.checking = this.status();
    const r = await this.checking;
    this.checking = null;
    if (this.stopped || this.paused || this.state === 'open') return;
    const wasRefused = this.state === 'refused' || this.state === 'limited';
    // A device credential the relay does not know was revoked (or signed
    // out elsewhere): asking again would only be refused again.
    if (r.code === 401 && isDeviceCredential(this.token)) { this.revoked(); return; }
    if (r.code === 401 || r.code === 403 || r.code === 429) {
      this.setState(r.code === 429 ? 'limited' : 'refused');
      if (!wasRefused) {
        clearTimeout(this.timer);
        this.timer = null;
        this.drop();
      }
      this.retry();
    } else if (r.code === 200) {
      this.setState('reconnecting');
      if (wasRefused) this.reconnectNow(false);
    } else {
      this.setState('offline');
      if (wasRefused) this.retry();
    }
  }

  /**
   * status asks GET /status (with the session's id, whether its CLI is
   * connected): {code, cli?}; code 0 when the relay did not answer in time.
   */
  async status(session) {
    const ctl = new AbortController();
    const t = setTimeout(() => ctl.abort(), this.timing.status);
    try {
      const res = await fetch(this.base + '/status' + (session ? '?session=' + encodeURIComponent(session) : ''), {
        headers: { Authorization: 'Bearer ' + this.token }, cache: 'no-store', signal: ctl.signal,
      });
      let body = {};
      try { body = await res.json(); } catch { /* a proxy's error page */ }
      return { code: res.status, cli: typeof body?.cli === 'boolean' ? body.cli : undefined };
    } catch {
      return { code: 0 };
    } finally {
      clearTimeout(t);
    }
  }

  /**
   * deleteSession asks DELETE /sessions/<id>: the relay's status code, 0
   * when it did not answer in time.
   */
  async deleteSession(session) {
    const ctl = new AbortController();
    const t = setTimeout(() => ctl.abort(), this.timing.status);
    try {
      const res = await fetch(this.base + '/sessions/' + encodeURIComponent(session), {
        method: 'DELETE', headers: { Authorization: 'Bearer ' + this.token }, cache: 'no-store', signal: ctl.signal,
      });
      return res.status;
    } catch {
      return 0;
    } finally {
      clearTimeout(t);
    }
  }

  retry() {
    if (this.stopped || this.timer || this.paused || this.ws) return;
    if (navigator.onLine === false) { this.setState('offline'); return; } // 'online' reconnects
    const refused = this.state === 'refused' || this.state === 'limited';
    const base = refused ? this.timing.refusedRetry : Math.min(this.timing.backoffMax, this.timing.backoffMin * 2 ** Math.min(this.failures, 16));
    this.failures++;
    this.timer = setTimeout(() => {
      this.timer = null;
      // A refused credential is checked first: no websocket (another failed
      // login) until the relay takes it.
      if (refused) this.diagnose(); else this.connect();
    }, base / 2 + Math.random() * base / 2);
  }

  /**
   * reconnectNow drops a waiting retry and connects at once (the network
   * is back, or changed: with force, an open socket is replaced too, as it
   * may be on the old network). An attempt still connecting is dropped: one
   * started while the network was gone would wait out its connect timeout
   * (its packets were lost); one started less than timing.fresh ago is
   * kept, so a burst of events makes one attempt.
   */
  reconnectNow(force) {
    if (this.stopped || this.paused) return;
    if (this.ws) {
      if (this.ws.readyState === WebSocket.OPEN && !force) return;
      if (this.ws.readyState === WebSocket.CONNECTING && Date.now() - this.wsStarted < this.timing.fresh) return;
      this.drop();
    }
    clearTimeout(this.timer);
    this.timer = null;
    this.failures = 0;
    this.connect();
  }

  /** watch checks, while the page is visible, that the socket is not silent. */
  watch() {
    this.unwatch();
    this.watcher = setInterval(() => {
      if (document.visibilityState !== 'visible' || !this.ws || this.ws.readyState !== WebSocket.OPEN) return;
      if (Date.now() - this.lastMessage > this.timing.silence) this.dead();
    }, this.timing.check);
  }

  unwatch() {
    clearInterval(this.watcher);
    this.watcher = null;
  }

  /** dead closes an open socket that went silent, and connects again. */
  dead() {
    this.deaths++;
    this.drop();
    this.setState('reconnecting');
    this.failures = 0;
    this.failed();
  }

  /**
   * visibilityChanged: a hidden tab closes its socket after hiddenClose; a
   * visible one reconnects at once if it has no socket, one still
   * connecting (see reconnectNow), or one silent for longer than a
   * heartbeat (phone unlocked, tab back).
   */
  visibilityChanged() {
    if (this.stopped) return;
    this.sendVisibility();
    if (document.visibilityState === 'hidden') {
      clearTimeout(this.hiddenTimer);
      this.hiddenTimer = setTimeout(() => this.pause(), this.timing.hiddenClose);
      return;
    }
    clearTimeout(this.hiddenTimer);
    this.hiddenTimer = null;
    if (this.paused) {
      this.paused = false;
      this.setState('reconnecting');
      this.reconnectNow(false);
      return;
    }
    if (this.ws?.readyState === WebSocket.OPEN && Date.now() - this.lastMessage > this.timing.stale) { this.dead(); return; }
    if (this.ws?.readyState !== WebSocket.OPEN && this.state !== 'refused' && this.state !== 'limited') this.reconnectNow(false);
  }

  /** pause closes the socket of a tab hidden for hiddenClose. */
  pause() {
    if (this.stopped || document.visibilityState !== 'hidden') return;
    this.paused = true;
    clearTimeout(this.timer);
    this.timer = null;
    this.drop();
    this.setState('paused');
  }

  /** sendVisibility tells the relay what this page shows (see visibility). */
  sendVisibility() {
    if (this.visibility) this.send({ type: 'visibility', ...this.visibility() });
  }

  /** bad reports a frame that was skipped, and why. */
  bad(why, data) {
    this.dispatchEvent(new CustomEvent('bad-frame', { detail: { why, key: why + ':' + String(data).slice(0, 300) } }));
  }

  setState(s) {
    if (this.state === s) return;
    this.state = s;
    this.dispatchEvent(new CustomEvent('state', { detail: s }));
  }

  send(f) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify({ v: V, ...f }));
    return true;
  }

  /**
   * subscribe follows one session from after() (asked again at every
   * reconnection). The relay has no unsubscribe: following another session
   * opens a fresh socket so the old one's stream stops.
   */
  subscribe(session, after) {
    const had = this.subscription;
    this.stuck = 0;
    clearTimeout(this.busyTimer);
    this.busyTimer = null;
    this.busyTries = 0;
    this.subscription = session ? { session, after } : null;
    if (had && had.session !== session && this.ws) {
      this.drop();
      this.connect();
      return;
    }
    if (session) this.sendSubscribe();
  }

  sendSubscribe() {
    const { session, after } = this.subscription;
    const a = after();
    if (this.send({ type: 'subscribe', session, after: a })) this.sent = { ws: this.ws, session, after: a, at: Date.now() };
  }

  /**
   * busy takes the relay's busy answer to a subscribe (too many reads of
   * history under way on this connection): nothing the reader needs to
   * see. The subscription's subscribe is sent again after a bounded
   * backoff, from where the caller is by then; after BUSY_TRIES answers in
   * a row the connection is replaced (a fresh one has no reads under way).
   * A busy answer to a subscribe of another session (one left since) is
   * dropped.
   */
  busy(ws, f) {
    this.busyAnswers++;
    const sub = this.subscription;
    if (!sub || f.session !== sub.session || f.before > 0 || this.busyTimer) return;
    if (++this.busyTries > BUSY_TRIES) {
      this.busyTries = 0;
      this.drop();
      this.connect();
      return;
    }
    this.busyTimer = setTimeout(() => {
      this.busyTimer = null;
      if (this.ws === ws && this.subscription === sub) this.sendSubscribe();
    }, busyDelay(this.busyTries - 1, this.timing));
  }

  /**
   * fetchBlob asks the relay for what it keeps beside an envelope (a tool
   * result's full text, a prompt's image): it resolves to the base64 of its
   * bytes, or rejects with the relay's reason, or after BLOB_TIMEOUT_MS.
   */
  fetchBlob(session, id) {
    const ref = 'blob-' + newID();
    const opened = (b64) => (this.openBlob ? this.openBlob(session, id, b64) : b64);
    return new Promise((resolve, reject) => {
      if (!this.send({ type: 'blob', ref, session, id })) { reject(new Error('not connected to the relay')); return; }
      const timer = setTimeout(() => { this.blobs.delete(ref); reject(new Error('the relay did not answer')); }, BLOB_TIMEOUT_MS);
      this.blobs.set(ref, { resolve: (b64) => { Promise.resolve(opened(b64)).then(resolve, reject); }, reject, timer, id });
    });
  }

  blobAnswer(f) {
    const w = this.blobs.get(f.ref);
    this.blobs.delete(f.ref);
    clearTimeout(w.timer);
    const b = Array.isArray(f.blobs) ? f.blobs[0] : null;
    if (f.type === 'blob' && b && b.id === w.id && typeof b.data === 'string') w.resolve(b.data);
    else w.reject(new Error(typeof f.message === 'string' ? f.message.slice(0, 300) : 'the relay keeps nothing for it'));
  }

  /** command sends a command (with a fresh id, unless it has one) and returns its id. */
  command(session, cmd) {
    const id = cmd.id || newID();
    const f = { type: 'command', session, command: { ...cmd, id } };
    this.pending.set(id, f);
    this.send(f);
    return id;
  }

  /** revoked stops the connection for good: the relay no longer takes this credential. */
  revoked() {
    this.stop();
    this.setState('revoked');
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.busyTimer);
    clearTimeout(this.hiddenTimer);
    this.unwatch();
    removeEventListener('online', this.onOnline);
    removeEventListener('offline', this.onOffline);
    navigator.connection?.removeEventListener?.('change', this.onNetwork);
    document.removeEventListener('visibilitychange', this.onVisibility);
    removeEventListener('pageshow', this.onVisibility);
    this.drop();
  }
}

/** newID returns a cuid2-shaped random id: a letter, then 23 base-36 characters. */
export function newID() {
  const b = new Uint8Array(24);
  crypto.getRandomValues(b);
  let s = 'abcdefghijklmnopqrstuvwxyz'[b[0] % 26];
  for (let i = 1; i < 24; i++) s += (b[i] % 36).toString(36);
  return s;
}
