// The app's link to the relay: one websocket at a time, authenticated by the
// "ccrelay-token.<token>" subprotocol (never the URL). It reconnects by
// itself (backoff with jitter; at once when the network comes back or the
// page becomes visible) and, on every (re)connection, lists sessions and
// subscribes again from the last sequence number the caller saw, so nothing
// is missed or shown twice.

const V = 1;

// A subscription whose connection dies this many times in a row right
// after subscribing, before any of its frames arrived, is stuck on a frame
// the browser cannot read (a text frame that is not UTF-8 fails the whole
// connection): the caller is told, to skip past it.
export const STUCK_TRIES = 3;
// "Right after": within this many milliseconds of subscribing.
export const STUCK_WINDOW_MS = 3000;

export class Connection extends EventTarget {
  /**
   * @param {string} token the relay's token
   * @param {{url?: string}} [opts]
   */
  constructor(token, opts = {}) {
    super();
    this.token = token;
    this.url = opts.url || (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws/app';
    this.ws = null;
    this.state = 'connecting'; // connecting | open | closed | unauthorized
    this.attempt = 0;
    this.timer = null;
    this.lastMessage = 0;
    this.subscription = null; // {session, after: () => number}
    this.pending = new Map(); // command id -> command frame, resent on reconnect until answered
    this.stopped = false;
    this.probe = null;
    this.stuck = 0; // connections in a row that died right after subscribing
    this.sent = null; // {ws, session, after, at}: a subscribe sent, until its first frame
    this.onOnline = () => this.reconnectNow();
    this.onVisible = () => { if (document.visibilityState === 'visible') this.check(); };
    addEventListener('online', this.onOnline);
    document.addEventListener('visibilitychange', this.onVisible);
    addEventListener('pageshow', this.onVisible);
  }

  start() { this.connect(); }

  connect() {
    clearTimeout(this.timer);
    this.timer = null;
    if (this.stopped) return;
    let ws;
    try {
      ws = new WebSocket(this.url, ['ccrelay-token.' + this.token]);
    } catch (e) {
      this.retry();
      return;
    }
    this.ws = ws;
    this.setState('connecting');
    let opened = false;
    ws.onopen = () => {
      if (this.ws !== ws) return;
      opened = true;
      this.attempt = 0;
      this.lastMessage = Date.now();
      this.setState('open');
      this.send({ type: 'list' });
      if (this.subscription) this.sendSubscribe();
      for (const f of this.pending.values()) this.send(f);
    };
    ws.onmessage = (e) => {
      if (this.ws !== ws) return;
      this.lastMessage = Date.now();
      clearTimeout(this.probe);
      this.probe = null;
      let f;
      try { f = JSON.parse(e.data); } catch { this.bad('a frame that is not JSON', e.data); return; }
      if (!f || typeof f !== 'object' || Array.isArray(f) || typeof f.type !== 'string') { this.bad('a frame without a type', e.data); return; }
      if (f.v !== V) { this.bad('a frame of protocol version ' + String(f.v).slice(0, 10), e.data); return; }
      if (this.sent && this.sent.ws === ws && f.session === this.sent.session) { this.sent = null; this.stuck = 0; }
      if (f.type === 'command-status' && f.command && (f.status === 'done' || f.status === 'rejected')) this.pending.delete(f.command.id);
      this.dispatchEvent(new CustomEvent('frame', { detail: f }));
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      const sent = this.sent?.ws === ws ? this.sent : null;
      this.sent = null;
      if (sent && this.subscription?.session === sent.session && Date.now() - sent.at < STUCK_WINDOW_MS) {
        if (++this.stuck >= STUCK_TRIES) {
          this.stuck = 0;
          this.dispatchEvent(new CustomEvent('stuck', { detail: { session: sent.session, after: sent.after } }));
        }
      } else {
        this.stuck = 0;
      }
      // A refused upgrade looks like 1006 before open; after a few tries in
      // a row without ever opening, say that the token may be wrong.
      if (!opened && this.attempt >= 3) this.setState('unauthorized');
      else this.setState('closed');
      this.retry();
    };
    ws.onerror = () => {};
  }

  retry() {
    if (this.stopped || this.timer) return;
    const base = Math.min(10000, 400 * 2 ** Math.min(this.attempt, 5));
    this.attempt++;
    this.timer = setTimeout(() => { this.timer = null; this.connect(); }, base / 2 + Math.random() * base / 2);
  }

  /** reconnectNow drops a waiting retry and connects at once. */
  reconnectNow() {
    if (this.stopped) return;
    if (this.ws && this.ws.readyState <= WebSocket.OPEN) return;
    this.attempt = 0;
    this.connect();
  }

  /**
   * check runs when the page comes back (phone unlocked): a socket that
   * looks open may be dead after sleep, so ask for something and reconnect
   * if no answer comes.
   */
  check() {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) { this.reconnectNow(); return; }
    if (Date.now() - this.lastMessage < 15000 || this.probe) return;
    this.send({ type: 'list' });
    this.probe = setTimeout(() => {
      this.probe = null;
      if (this.ws) { const w = this.ws; this.ws = null; w.close(); this.setState('closed'); this.reconnectNow(); }
    }, 4000);
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
    this.subscription = session ? { session, after } : null;
    if (had && had.session !== session && this.ws) {
      const w = this.ws;
      this.ws = null;
      w.close();
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

  /** command sends a command (with a fresh id) and returns its id. */
  command(session, cmd) {
    const id = newID();
    const f = { type: 'command', session, command: { id, ...cmd } };
    this.pending.set(id, f);
    this.send(f);
    return id;
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    removeEventListener('online', this.onOnline);
    document.removeEventListener('visibilitychange', this.onVisible);
    removeEventListener('pageshow', this.onVisible);
    if (this.ws) this.ws.close();
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
