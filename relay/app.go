package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/coder/websocket"
)

func (s *Server) serveApp(w http.ResponseWriter, r *http.Request) {
	c, done, err := s.upgrade(smallBuffers{w}, r, appCompression)
	if err != nil {
		return
	}
	defer done()
	defer s.connOpened("app", r)(&err)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer s.dropVisibility(c)
	if r.URL.Query().Get("heartbeat") == "1" {
		defer s.heartbeat(ctx, c)() // stopped after ctx ends, which ends a beat under way
	}
	me := newPeer(c, ownerFrom(ctx))
	if p := principalFrom(ctx); p.role == RoleDevice {
		me.device = p.cred.ID
	}
	me.start(ctx)
	defer me.stop() // runs after ctx is cancelled
	defer s.unfollow(me)
	// A slot for each history read under way (subscribe, before pages):
	// taken before its goroutine starts, given back when it ends.
	reads := make(chan struct{}, MaxHistoryReads)
	busy := func(f protocol.Frame) error {
		e := errorFrame("busy", "%d reads of history are under way on this connection (at most %d): send the subscribe again once one has ended (its caught-up)", MaxHistoryReads, MaxHistoryReads)
		e.Ref, e.Session, e.After, e.Before = f.Ref, f.Session, f.After, f.Before
		return writeFrame(ctx, c, e)
	}
	s.addApp(me)
	type subscription struct {
		session string
		sub     *subscriber
	}
	var subs []subscription // ended with the connection
	defer func() {
		for _, x := range subs {
			s.hub.remove(x.session, x.sub)
		}
	}()
	var listing *lister // one per connection, however many list frames come
	defer func() {
		if listing != nil {
			s.hub.removeLister(listing)
		}
	}()
	err = s.readFrames(ctx, c, func(f protocol.Frame, _ []string) error {
		switch f.Type {
		case protocol.FrameCommand:
			return s.command(ctx, me, f)
		case protocol.FrameVisibility:
			return s.setVisibility(ctx, c, f)
		case protocol.FrameList:
			// Register first, then list: no change is missed in between
			// (a change may arrive twice; it carries the whole state).
			fresh := listing == nil
			if fresh {
				listing = s.hub.addLister(ownerFrom(ctx), me.kick)
			}
			forget := func() {
				if fresh {
					s.hub.removeLister(listing)
					listing = nil
				}
			}
			frame, err := s.listFrame(ctx, f)
			if errors.Is(err, errBadList) {
				forget()
				return writeFrame(ctx, c, errorFrame("bad-list", "%v", err))
			}
			if err != nil {
				forget()
				return writeFrame(ctx, c, errorFrame("store", "%v", err))
			}
			if err := writeRaw(ctx, c, frame); err != nil {
				forget()
				return err
			}
			if fresh {
				me.listen(listing) // the connection's writer sends the changes
			}
			return nil
		case protocol.FrameBlob:
			return s.sendBlob(ctx, c, f)
		case protocol.FrameSessionKey:
			// A listed session's key, to open its sealed summary.
			if err := checkSession(f.Session); err != nil {
				return writeFrame(ctx, c, errorFrame("bad-session-key", "%v", err))
			}
			if err := s.mine(ctx, f.Session); err != nil {
				e := errorFrame("not-found", "no session %s for this token", f.Session)
				e.Session = f.Session
				return writeFrame(ctx, c, e)
			}
			wrapped, machine, err := s.store.SessionKeyFor(ctx, f.Session, me.device)
			switch {
			case me.device == "" || errors.Is(err, ErrNoSessionKey):
				e := errorFrame("no-key", "the relay holds no key of session %s for this device", f.Session)
				e.Session = f.Session
				return writeFrame(ctx, c, e)
			case err != nil:
				s.storeFailed("read session key", f.Session, err)
				e := errorFrame("store", "the relay's store failed")
				e.Session = f.Session
				return writeFrame(ctx, c, e)
			}
			return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameSessionKey, Session: f.Session, Wrapped: wrapped, Machine: machine})
		case protocol.FrameSubscribe:
			if err := checkSession(f.Session); err != nil {
				return writeFrame(ctx, c, errorFrame("bad-subscribe", "%v", err))
			}
			if f.After < 0 {
				return writeFrame(ctx, c, errorFrame("bad-subscribe", "after %d is negative", f.After))
			}
			if f.Before < 0 {
				return writeFrame(ctx, c, errorFrame("bad-subscribe", "before %d is negative", f.Before))
			}
			if err := s.mine(ctx, f.Session); err != nil {
				return writeFrame(ctx, c, errorFrame("not-found", "no session %s for this token", f.Session))
			}
			select {
			case reads <- struct{}{}:
			default:
				return busy(f)
			}
			if f.Before > 0 {
				// A part of history: no live envelopes, no statuses.
				wg.Go(func() {
					defer func() { <-reads }()
					s.historyStarts()
					if err := s.streamPart(ctx, c, f.Session, f.After, f.Before); err != nil && ctx.Err() == nil {
						if errors.Is(err, errStore) {
							s.storeFailed("read", f.Session, err)
							c.Close(websocket.StatusInternalError, "the relay's store failed reading this session; see the relay's log")
							return
						}
						s.log.Debug("subscription ended", "session", f.Session, "err", err)
					}
				})
				return nil
			}
			s.follow(me, f.Session) // statuses of its commands and its key, too
			if err := s.sendSessionKey(ctx, c, me.device, f.Session); err != nil {
				s.storeFailed("read session key", f.Session, err)
			}
			sub := s.hub.add(f.Session, me.kick)
			subs = append(subs, subscription{f.Session, sub})
			ended := func(err error) {
				s.hub.remove(f.Session, sub)
				switch {
				case err == nil || ctx.Err() != nil:
				case errors.Is(err, errFellBehind):
					s.log.Debug("subscription ended", "session", f.Session, "err", err)
					c.Close(websocket.StatusTryAgainLater, "subscription fell behind; subscribe again from the last seq")
				case errors.Is(err, errStore):
					s.storeFailed("read", f.Session, err)
					c.Close(websocket.StatusInternalError, "the relay's store failed reading this session; see the relay's log")
				default:
					s.log.Debug("subscription ended", "session", f.Session, "err", err)
				}
			}
			wg.Go(func() { // the history; then the writer serves it
				defer func() { <-reads }()
				s.historyStarts()
				deliver, err := s.stream(ctx, c, f.Session, f.After)
				if err != nil {
					ended(err)
					return
				}
				me.follow(&liveSub{sub: sub, deliver: deliver, end: ended})
			})
			return nil
		default:
			return writeFrame(ctx, c, errorFrame("bad-type", "unknown frame type %q on the app endpoint", f.Type))
		}
	})
	cancel()
	s.closeStatus(c, err)
}

// MaxHistoryReads bounds the reads of history (subscribe, and its before
// pages) under way at once on one app connection: each is a goroutine and
// a run of store queries, and an app that sends subscribes without waiting
// for their caught-up would otherwise start as many as it sends. One over
// the bound is answered with the error code busy (with its ref, session,
// after and before) and not acted on; the app sends it again once one of
// its reads has ended; the bundled app does so after a backoff (conn.js).
const MaxHistoryReads = 4

// historyStarts is called as each read of history starts (tests hold
// reads there).
func (s *Server) historyStarts() {
	if s.historyHook != nil {
		s.historyHook()
	}
}

// sendBlob answers an app's FrameBlob with what is kept beside the
// envelope it names, in a session of the app's owner (the answer carries
// the frame's ref back).
func (s *Server) sendBlob(ctx context.Context, c *websocket.Conn, f protocol.Frame) error {
	refuse := func(code, format string, args ...any) error {
		e := errorFrame(code, format, args...)
		e.Ref, e.Session, e.ID = f.Ref, f.Session, f.ID
		return writeFrame(ctx, c, e)
	}
	if err := checkSession(f.Session); err != nil {
		return refuse("bad-blob", "%v", err)
	}
	if !protocol.IsCuid(f.ID) {
		return refuse("bad-blob", "envelope id %q is not a cuid2", clip(f.ID, 40))
	}
	if err := s.mine(ctx, f.Session); err != nil {
		return refuse("not-found", "no session %s for this token", f.Session)
	}
	data, err := s.store.Blob(ctx, f.Session, f.ID)
	switch {
	case errors.Is(err, ErrNoBlob):
		return refuse("not-found", "nothing is kept beside envelope %s", f.ID)
	case err != nil:
		s.storeFailed("read blob", f.Session, err)
		return refuse("store", "the relay's store failed")
	}
	return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameBlob, Ref: f.Ref, Session: f.Session, ID: f.ID,
		Blobs: []protocol.Blob{{ID: f.ID, Data: data}}})
}

// App liveness (docs/protocol.md, "Liveness and status"). Browsers do not
// let a page see websocket pings, so an app that asks for it (connects to
// /ws/app?heartbeat=1) gets a small frame it can see every
// HeartbeatInterval, and knows its socket is dead when they stop. The relay
// pings such an app after each heartbeat and closes it when the pong does
// not come within HeartbeatDeadline: a dead path is noticed by both sides
// within HeartbeatInterval + HeartbeatDeadline.
const (
	HeartbeatInterval = 5 * time.Second
	HeartbeatDeadline = 10 * time.Second
)

// heartbeatFrame is the whole heartbeat: no other field.
var heartbeatFrame = []byte(`{"v":` + strconv.Itoa(protocol.FrameVersion) + `,"type":"heartbeat"}`)

// heartbeat sends c a heartbeat frame and a ping every HeartbeatInterval
// until stopped, and closes c when either is not through (frame written,
// pong back) within HeartbeatDeadline. It runs on a timer (every), not on
// a goroutine of its own: a browser's idle connection pays no stack for it.
func (s *Server) heartbeat(ctx context.Context, c *websocket.Conn) (stop func()) {
	return every(HeartbeatInterval, func() bool {
		hctx, cancel := context.WithTimeout(ctx, HeartbeatDeadline)
		err := c.Write(hctx, websocket.MessageText, heartbeatFrame)
		if err == nil {
			err = c.Ping(hctx)
		}
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Debug("app missed its heartbeat deadline; closing it", "err", err)
				c.CloseNow()
			}
			return false
		}
		return true
	})
}

// stream sends the history of session after `after` and caught-up, and
// returns deliver, which sends each published batch that follows (live
// envelopes), with no gap and no duplicate between the two. The subscriber
// is registered before the history is read, so nothing stored meanwhile is
// missed; what both deliver is sent once. deliver runs on the connection's
// writer (peer.run): an idle subscription holds no goroutine.
//
// An after beyond the session's end is clamped to it: caught-up says where
// the session ends, and what is stored later follows.
func (s *Server) stream(ctx context.Context, c *websocket.Conn, session string, after int64) (deliver func(*published) error, err error) {
	end, err := s.store.LastSeq(ctx, session)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errStore, err)
	}
	last := min(after, end)
	sendFrom := func() error {
		var buf []byte // one frame's memory, for each frame in turn
		for {
			frame, l, more, err := s.store.historyFrame(ctx, buf, session, last, 0)
			if err != nil {
				return fmt.Errorf("%w: %w", errStore, err)
			}
			if frame != nil {
				if err := writeRaw(ctx, c, frame); err != nil {
					return err
				}
				buf, last = frame, l
			}
			if !more {
				return nil
			}
		}
	}
	if err := sendFrom(); err != nil {
		return nil, err
	}
	if err := writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameCaughtUp, Session: session, Seq: last}); err != nil {
		return nil, err
	}
	deliver = func(pub *published) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if pub.live {
			return writeRaw(ctx, c, pub.frame)
		}
		if pub.wake {
			return sendFrom()
		}
		if pub.rows[0].Seq == last+1 {
			// The common case: encoded once for every app.
			if err := writeRaw(ctx, c, pub.frame); err != nil {
				return err
			}
			last = pub.rows[len(pub.rows)-1].Seq
			return nil
		}
		if pub.rows[len(pub.rows)-1].Seq <= last {
			return nil // already sent with the history
		}
		// Overlaps the history, or (should not happen) leaves a gap:
		// send what follows last from the store.
		return sendFrom()
	}
	return deliver, nil
}

// streamPart sends a session's stored envelopes with a sequence number
// above after and below before, then caught-up at the last one sent (at
// after when none is), and ends: a part of history read apart from the
// subscription that follows the session.
func (s *Server) streamPart(ctx context.Context, c *websocket.Conn, session string, after, before int64) error {
	last := after
	var buf []byte // one frame's memory, for each frame in turn
	for more := true; more; {
		frame, l, m, err := s.store.historyFrame(ctx, buf, session, last, before)
		if err != nil {
			return fmt.Errorf("%w: %w", errStore, err)
		}
		if frame != nil {
			if err := writeRaw(ctx, c, frame); err != nil {
				return err
			}
			buf, last = frame, l
		}
		more = m
	}
	return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameCaughtUp, Session: session, Seq: last})
}

// Why a subscription ended.
var (
	errFellBehind = errors.New("subscriber fell behind")
	errStore      = errors.New("store error")
)

// published is one stored batch on its way to the apps, with its frame
// encoded once.
type published struct {
	rows  []Stored
	frame []byte
	live  bool // not stored: sent as is, outside the sequence
	wake  bool // another relay stored more: read it from the store
}

func newPublished(session string, rows []Stored) published {
	return published{rows: rows, frame: batchFrame(session, rows)}
}

// batchFrame encodes a FrameBatch of stored envelopes. It is written by hand
// (the bytes json.Marshal would give): the envelopes were validated when
// stored, and re-validating every one of them on each history read was most
// of the cost of opening a long session.
func batchFrame(session string, rows []Stored) []byte {
	sess, _ := json.Marshal(session)
	n := 64 + len(sess)
	for _, r := range rows {
		n += len(r.Body) + 32
	}
	b := make([]byte, 0, n)
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, protocol.FrameVersion, 10)
	b = append(b, `,"type":"`+protocol.FrameBatch+`","session":`...)
	b = append(b, sess...)
	b = append(b, `,"items":[`...)
	for i, r := range rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"seq":`...)
		b = strconv.AppendInt(b, r.Seq, 10)
		b = append(b, `,"envelope":`...)
		b = append(b, r.Body...)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// sessionsFrame encodes a FrameSessions of the sessions' summaries by hand
// (the bytes json.Marshal would give, without re-reading every stored
// summary, which was most of the cost of listing 10,000 sessions).
func sessionsFrame(all []SessionInfo) []byte { return sessionsPageFrame(all, "", "", "", false) }

// sessionsPageFrame is sessionsFrame with a page's ref, cursor and next.
func sessionsPageFrame(all []SessionInfo, ref, cursor, next string, paged bool) []byte {
	n := 64
	for _, si := range all {
		n += len(si.Info) + len(si.Prompt) + 96
	}
	b := make([]byte, 0, n)
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, protocol.FrameVersion, 10)
	b = append(b, `,"type":"`+protocol.FrameSessions+`","sessions":[`...)
	for i, si := range all {
		if i > 0 {
			b = append(b, ',')
		}
		sum := summary(si)
		id, _ := json.Marshal(sum.ID)
		b = append(b, `{"id":`...)
		b = append(b, id...)
		b = append(b, `,"info":`...)
		b = append(b, sum.Info...)
		if sum.Prompt != "" {
			p, _ := json.Marshal(sum.Prompt)
			b = append(b, `,"prompt":`...)
			b = append(b, p...)
		}
		b = append(b, `,"lastSeq":`...)
		b = strconv.AppendInt(b, sum.LastSeq, 10)
		b = append(b, `,"updated":`...)
		b = strconv.AppendInt(b, sum.Updated, 10)
		b = append(b, '}')
	}
	b = append(b, ']')
	if paged {
		// Always there on a page, even empty: an app tells a page from a
		// whole list by it.
		if ref != "" {
			r, _ := json.Marshal(ref)
			b = append(b, `,"ref":`...)
			b = append(b, r...)
		}
		cur, _ := json.Marshal(cursor)
		nxt, _ := json.Marshal(next)
		b = append(b, `,"cursor":`...)
		b = append(b, cur...)
		b = append(b, `,"next":`...)
		b = append(b, nxt...)
	}
	return append(b, '}')
}

func writeRaw(ctx context.Context, c *websocket.Conn, frame []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.Write(ctx, websocket.MessageText, frame)
}
