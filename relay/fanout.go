package relay

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ccrelay/ccrelay/protocol"
)

// Several relays on one PostgreSQL database (nodes) tell each other what
// changed with NOTIFY, as a wake-up only: what a notice names is read from
// the tables, from where each node stands, so a notice lost (a node's
// listening connection dropped, a node restarted) loses nothing; after its
// listening connection comes back a node reads again everything its apps
// follow. One channel, ccrelay; a notice is a small JSON object (fanMsg).
//
// What goes across:
//   - e: a session has new envelopes: each node's apps that follow it read
//     on from their last sequence number, and its listers get the session;
//   - s: a session's announcement changed (or it was deleted);
//   - k: a CLI stored a session's keys: each node's apps of those devices
//     get theirs (whatever they show);
//   - c: a session has a command waiting: the node whose CLI owns the
//     session hands it over;
//   - x: a command's status moved: each node tells its apps that follow
//     the session;
//   - l: a live frame (token deltas): sent on only when small (not stored,
//     never resent: a live frame lost costs nothing but a flicker).
//
// Which node holds a session's CLI is in cli_presence, refreshed by each
// node while it lives; a command that is not queued (a permission answer,
// an interrupt) is taken only when some node holds the CLI.

// maxFanRead bounds the sessions a node remembers where it read up to
// for its apps (fanout.read).
const maxFanRead = 4096

// fanChannel is the NOTIFY channel.
const fanChannel = "ccrelay"

// maxNotifyBytes bounds a notice's payload (PostgreSQL's limit is 8000).
const maxNotifyBytes = 7900

// Presence: a node refreshes its rows every presenceEvery; a row older
// than presenceStale belongs to a node that is gone.
const (
	presenceEvery = 5 * time.Second
	presenceStale = 15 * time.Second
)

type fanMsg struct {
	Kind    string          `json:"k"`
	From    string          `json:"f"`
	Session string          `json:"s"`
	Owner   string          `json:"o,omitempty"`
	ID      string          `json:"i,omitempty"`
	Live    json.RawMessage `json:"l,omitempty"`
}

// fanout is a node's link to the others: nil on SQLite (one node).
type fanout struct {
	node      string // this node's id
	url       string
	connected chan struct{} // closed once the first LISTEN is in place
	once      sync.Once
	// read is, for sessions this node's apps follow, the sequence number
	// up to which this node read what other nodes stored and published it
	// to them (only the listening goroutine uses it; at most maxFanRead:
	// a session forgotten is woken again, as at its first notice).
	read fifoSet[int64]
}

func newNodeID() string {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// send tells the other nodes (best effort: they read the tables anyway
// when they reconnect).
func (s *Server) fanSend(ctx context.Context, m fanMsg) {
	if s.fan == nil {
		return
	}
	m.From = s.fan.node
	b, _ := json.Marshal(m)
	if len(b) > maxNotifyBytes {
		return // a live frame too large to go across
	}
	if _, err := s.store.w.ExecContext(context.WithoutCancel(ctx), `SELECT pg_notify(?, ?)`, fanChannel, string(b)); err != nil {
		s.log.Warn("could not notify the other relays", "kind", m.Kind, "session", m.Session, "err", err)
	}
}

// fanNotice is m as a notice an append sends with what it stores (nil on
// SQLite, or if it is too large to go across).
func (s *Server) fanNotice(m fanMsg) *pgNotice {
	if s.fan == nil {
		return nil
	}
	m.From = s.fan.node
	b, _ := json.Marshal(m)
	if len(b) > maxNotifyBytes {
		return nil
	}
	return &pgNotice{channel: fanChannel, payload: string(b)}
}

// RunFanout keeps this node's link to the other relays on the same
// PostgreSQL database until ctx ends: it listens for their notices, and
// keeps this node's CLIs in cli_presence. It returns at once on SQLite.
func (s *Server) RunFanout(ctx context.Context) {
	if s.fan == nil {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.keepPresence(ctx) })
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("the link to the other relays dropped; reconnecting", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff + time.Duration(rand.Int64N(int64(backoff)))):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// listen holds one LISTEN connection until it fails or ctx ends.
func (s *Server) listen(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.fan.url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+fanChannel); err != nil {
		return err
	}
	s.fan.once.Do(func() { close(s.fan.connected) })
	// Notices sent while this node was not listening were lost: read on
	// for everything this node's apps follow, and offer its CLIs what
	// waits for them.
	s.caughtUpAll(ctx)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var m fanMsg
		if json.Unmarshal([]byte(n.Payload), &m) != nil || m.From == s.fan.node || !protocol.IsSessionID(m.Session) {
			continue
		}
		s.fanReceived(ctx, m)
	}
}

// fanReceived acts on another node's notice.
func (s *Server) fanReceived(ctx context.Context, m fanMsg) {
	switch m.Kind {
	case "e":
		s.publishStored(ctx, m.Session)
		s.fanSessionChanged(ctx, m.Session, m.Owner)
	case "s":
		s.fanSessionChanged(ctx, m.Session, m.Owner)
	case "k":
		s.fanKeysStored(ctx, m.Session, m.Owner)
	case "c":
		s.peersMu.Lock()
		cli := s.owners[m.Session]
		s.peersMu.Unlock()
		if cli != nil {
			s.deliverQueuedFor(withOwner(ctx, cli.owner), cli.owner, m.Session, cli)
		}
	case "x":
		c, err := s.store.Command(ctx, m.Owner, m.Session, m.ID)
		if err == nil {
			s.notify(m.Owner, m.Session, m.ID, c.Status, c.Message, c.Sealed)
		}
	case "l":
		if len(m.Live) > 0 && m.Live[0] == '{' {
			frame, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameLive, Session: m.Session, Payload: m.Live})
			s.hub.publish(m.Session, published{frame: frame, live: true})
		}
	}
}

// publishStored publishes to this node's apps that follow session what
// another node stored since this node last read: read once for all of
// them, as a local append is, not once by each. The first notice of a
// session wakes them instead (each reads on from where it stands) and
// notes where the session ends. An app whose position is elsewhere reads
// what it lacks itself (stream), so a position here that is off costs
// reads, never an envelope.
func (s *Server) publishStored(ctx context.Context, session string) {
	if !s.hub.followed(session) {
		s.fan.read.forget(session)
		return
	}
	from, known := s.fan.read.get(session)
	if !known {
		last, err := s.store.LastSeq(ctx, session)
		s.hub.wake(session)
		if err == nil {
			s.fan.read.put(session, last, maxFanRead)
		}
		return
	}
	for {
		rows, err := s.store.Read(ctx, session, from, historyPage)
		if err != nil {
			s.fan.read.forget(session)
			s.hub.wake(session)
			return
		}
		if len(rows) > 0 {
			s.hub.publish(session, newPublished(session, rows))
			from = rows[len(rows)-1].Seq
			s.fan.read.put(session, from, maxFanRead)
		}
		if len(rows) < historyPage {
			return
		}
	}
}

// fanSessionChanged tells this node's listers what the store holds of a
// session now (or that it was deleted).
func (s *Server) fanSessionChanged(ctx context.Context, session, owner string) {
	si, err := s.store.session(ctx, session)
	if err == nil {
		s.hub.sessionChanged(si)
		return
	}
	if gone, _ := s.store.Deleted(ctx, session); gone && owner != "" {
		s.hub.sessionChangedSummary(owner, protocol.SessionSummary{ID: session, Deleted: true})
	}
}

// caughtUpAll is what a node does when it may have missed notices: its
// apps read on from where they stand, and its CLIs get what waits.
func (s *Server) caughtUpAll(ctx context.Context) {
	s.fan.read = fifoSet[int64]{}
	s.hub.wakeAll()
	s.peersMu.Lock()
	owned := make(map[string]*peer, len(s.owners))
	for session, cli := range s.owners {
		owned[session] = cli
	}
	s.peersMu.Unlock()
	for session, cli := range owned {
		s.deliverQueuedFor(withOwner(ctx, cli.owner), cli.owner, session, cli)
	}
}

// keepPresence records, every presenceEvery, that this node still holds
// its CLIs' sessions and its app connections' visibility (push_visible);
// at the end its rows are removed.
func (s *Server) keepPresence(ctx context.Context) {
	t := time.NewTicker(presenceEvery)
	defer t.Stop()
	defer s.store.w.ExecContext(context.WithoutCancel(ctx), `DELETE FROM cli_presence WHERE node = ?`, s.fan.node)
	defer s.store.dropVisible(context.WithoutCancel(ctx), s.fan.node, -1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := time.Now()
			if _, err := s.store.w.ExecContext(ctx, `UPDATE cli_presence SET seen_ms = ? WHERE node = ?`, now.UnixMilli(), s.fan.node); err != nil && ctx.Err() == nil {
				s.log.Warn("could not refresh this relay's CLIs", "err", err)
			}
			if err := s.store.refreshVisible(ctx, s.fan.node, now); err != nil && ctx.Err() == nil {
				s.log.Warn("could not refresh what this relay's apps show", "err", err)
			}
		}
	}
}

// present records that this node holds session's CLI (on).
func (s *Server) present(ctx context.Context, session string, on bool) {
	if s.fan == nil {
		return
	}
	var err error
	if on {
		_, err = s.store.w.ExecContext(ctx, `INSERT INTO cli_presence (session, node, seen_ms) VALUES (?, ?, ?)
			ON CONFLICT (session) DO UPDATE SET node = excluded.node, seen_ms = excluded.seen_ms`, session, s.fan.node, time.Now().UnixMilli())
	} else {
		_, err = s.store.w.ExecContext(context.WithoutCancel(ctx), `DELETE FROM cli_presence WHERE session = ? AND node = ?`, session, s.fan.node)
	}
	if err != nil {
		s.log.Warn("could not record where a CLI is", "session", session, "err", err)
	}
}

// heldElsewhere reports whether another live node holds session's CLI.
func (s *Server) heldElsewhere(ctx context.Context, session string) bool {
	if s.fan == nil {
		return false
	}
	var node string
	var seen int64
	err := s.store.r.QueryRowContext(ctx, `SELECT node, seen_ms FROM cli_presence WHERE session = ?`, session).Scan(&node, &seen)
	return err == nil && node != s.fan.node && time.Since(time.UnixMilli(seen)) < presenceStale
}

func withOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}
