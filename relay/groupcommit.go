package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Envelopes are acknowledged only once they would survive power loss: they
// are committed with synchronous=FULL (SQLite fsyncs the WAL at the
// commit), set on the writer connection for the envelope path only (the
// rest of the store stays NORMAL: it survives a crash of the relay). To keep
// that cheap, appends from every connection are committed in groups: one
// goroutine takes whatever appends are waiting, runs each in its own
// savepoint of one transaction and commits once (one fsync for the group).
// An append that fails rolls back to its savepoint alone. On PostgreSQL
// each append is its own transaction, run in its caller's goroutine
// (appendNow).

// A group is whatever appends wait when the committer takes the first:
// it never waits for more to come (a lone append commits at once), and
// it closes, whichever comes first, when nothing else waits, when it holds
// MaxGroupAppends appends, when its envelopes reach MaxGroupBytes (the
// append that crosses it is the last), or once the committer has spent
// MaxGroupGather taking them (a steady stream of appends does not hold
// the first one back). What is left waits for the next group.
const (
	// MaxGroupAppends bounds the appends (batches) committed together.
	MaxGroupAppends = 64
	// MaxGroupBytes bounds the envelope bytes of a group: one group's
	// writes and fsync stay short for its first append.
	MaxGroupBytes = 4 << 20
	// MaxGroupGather bounds the time spent taking a group's appends.
	MaxGroupGather = time.Millisecond
)

// errStoreClosed answers an append made after Close.
var errStoreClosed = errors.New("store closed")

// grouper is the store's group committer. Its zero value is ready: the
// committing goroutine starts with the first append and Close stops it.
type grouper struct {
	once      sync.Once
	closeOnce sync.Once
	ch        chan *appendReq // unbuffered: a request sent is being handled
	stop      chan struct{}
	done      chan struct{}
	// max bounds a group (MaxGroupAppends when 0; benchmarks set 1 to
	// commit every append alone); maxBytes (MaxGroupBytes when 0) and
	// gather (MaxGroupGather when 0) likewise.
	max      int
	maxBytes int
	gather   time.Duration
	// now is the clock of the gathering (time.Now when nil; tests set it).
	now func() time.Time
	// waiting counts the appends sent and not yet taken by the committer;
	// committed, when set (tests), is called with each group's size
	// before it is committed.
	waiting   atomic.Int64
	committed func(n int)
	// On PostgreSQL appends do not go through the committer: each runs in
	// its caller's goroutine, in its own transaction, one session's at a
	// time (sessions) so that its after calls come in sequence order.
	// running counts them, so that Close waits for them; closed (under
	// mu) refuses new ones.
	mu       sync.Mutex
	closed   bool
	running  sync.WaitGroup
	sessions sessionLocks
	// synchronous is the mode of the envelope path: "FULL" when empty
	// (benchmarks set "NORMAL" to compare).
	synchronous string
	// groups counts the groups committed, mode the synchronous mode of the
	// last one as SQLite reports it (tests).
	groups atomic.Int64
	mode   atomic.Int64
}

type appendReq struct {
	ctx     context.Context
	session string
	items   []Item
	// after, if set, is called with the result once the group is
	// committed, in commit order, before the append returns.
	after func([]Appended)
	res   []Appended
	// si is the session's row as the append left it (SQLite), set with
	// res.
	si   SessionInfo
	err  error
	done chan struct{}
	// bytes is the size of the items' bodies and blobs.
	bytes int
}

// initGroup makes the channels and starts the committer, once.
func (s *Store) initGroup() {
	g := &s.group
	g.once.Do(func() {
		g.ch = make(chan *appendReq)
		g.stop = make(chan struct{})
		g.done = make(chan struct{})
		go s.commitGroups()
	})
}

// Append stores items in order in session (created if new) and returns
// what became of each: a new sequence number for a new id, the existing one
// for an id stored before (the first content stays). It is all or nothing,
// and durable (fsynced) when it returns.
func (s *Store) Append(ctx context.Context, session string, items []Item) ([]Appended, error) {
	return s.AppendThen(ctx, session, items, nil)
}

// AppendThen is Append that also calls after with the result once it is
// committed: the calls for all appends happen in the order of their
// sequence numbers (the relay publishes to apps there).
func (s *Store) AppendThen(ctx context.Context, session string, items []Item, after func([]Appended)) ([]Appended, error) {
	res, _, err := s.appendNotice(ctx, session, items, nil, after)
	return res, err
}

// appendNotice is AppendThen that, on PostgreSQL, also sends notice in
// the append's transaction if it stores anything, and returns the session
// as the append left it, as committed.
func (s *Store) appendNotice(ctx context.Context, session string, items []Item, notice *pgNotice, after func([]Appended)) ([]Appended, *SessionInfo, error) {
	if s.w.d == postgresSQL {
		return s.appendNow(ctx, session, items, notice, after)
	}
	s.initGroup()
	g := &s.group
	req := &appendReq{ctx: ctx, session: session, items: items, after: after, done: make(chan struct{})}
	for _, it := range items {
		req.bytes += len(it.Body) + len(it.Blob)
	}
	g.waiting.Add(1)
	select {
	case g.ch <- req:
	case <-ctx.Done():
		g.waiting.Add(-1)
		return nil, nil, fmt.Errorf("append to %s: %w", session, ctx.Err())
	case <-g.stop:
		g.waiting.Add(-1)
		return nil, nil, fmt.Errorf("append to %s: %w", session, errStoreClosed)
	}
	<-req.done // the committer always finishes a request it took
	if req.err != nil {
		return nil, nil, req.err
	}
	return req.res, &req.si, nil
}

// appendNow is appendNotice on PostgreSQL, in the caller's goroutine: the
// append is one statement in its own transaction (appendpg.go), and there
// is nothing to group. A group would hold several sessions' row locks at
// once, in an order another node's group could take the other way round
// (a deadlock); and going through the committer cost two goroutine
// wake-ups an append and made a node's appends of every session wait in
// one line. Appends of one session take turns (the row lock would make
// them anyway), so that their after calls come in sequence order.
func (s *Store) appendNow(ctx context.Context, session string, items []Item, notice *pgNotice, after func([]Appended)) ([]Appended, *SessionInfo, error) {
	g := &s.group
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, nil, fmt.Errorf("append to %s: %w", session, errStoreClosed)
	}
	g.running.Add(1)
	g.mu.Unlock()
	defer g.running.Done()
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("append to %s: %w", session, err)
	}
	unlock, err := g.sessions.lock(ctx, session)
	if err != nil {
		return nil, nil, fmt.Errorf("append to %s: %w", session, err)
	}
	defer unlock()
	// Once sent, the statement runs to its end: a caller that gives up
	// does not leave the connection in doubt (the CLI sends again, and
	// an id stored before gets its number back).
	res, info, err := s.appendPG(context.WithoutCancel(ctx), session, items, notice)
	if err != nil {
		return nil, nil, fmt.Errorf("append to %s: %w", session, err)
	}
	if after != nil {
		after(res)
	}
	return res, info, nil
}

// sessionLocks lets one append of a session run at a time; a session's
// lock exists while some append holds or waits for it.
type sessionLocks struct {
	mu sync.Mutex
	m  map[string]*sessionLock
}

type sessionLock struct {
	c chan struct{} // holds a value while the lock is held
	n int           // under sessionLocks.mu: appends holding or waiting
}

// lock takes session's lock, or gives up when ctx ends.
func (l *sessionLocks) lock(ctx context.Context, session string) (unlock func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*sessionLock{}
	}
	sl := l.m[session]
	if sl == nil {
		sl = &sessionLock{c: make(chan struct{}, 1)}
		l.m[session] = sl
	}
	sl.n++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if sl.n--; sl.n == 0 {
			delete(l.m, session)
		}
		l.mu.Unlock()
	}
	select {
	case sl.c <- struct{}{}:
		return func() { <-sl.c; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// commitGroups runs until Close: it takes the appends waiting and commits
// them as one group.
func (s *Store) commitGroups() {
	g := &s.group
	defer close(g.done)
	limit, maxBytes, gather := cmp.Or(g.max, MaxGroupAppends), cmp.Or(g.maxBytes, MaxGroupBytes), cmp.Or(g.gather, MaxGroupGather)
	now := g.now
	if now == nil {
		now = time.Now
	}
	for {
		var reqs []*appendReq
		select {
		case r := <-g.ch:
			g.waiting.Add(-1)
			reqs = append(reqs, r)
		case <-g.stop:
			return
		}
		bytes, start := reqs[0].bytes, now()
	more:
		for len(reqs) < limit && bytes < maxBytes && now().Sub(start) < gather {
			select {
			case r := <-g.ch:
				g.waiting.Add(-1)
				reqs = append(reqs, r)
				bytes += r.bytes
			default:
				break more
			}
		}
		if g.committed != nil {
			g.committed(len(reqs))
		}
		s.commitGroup(reqs)
		g.groups.Add(1)
	}
}

// commitGroup appends every request in one transaction, each in its own
// savepoint, commits once, then answers them in order.
func (s *Store) commitGroup(reqs []*appendReq) {
	ctx := context.Background() // one request's end must not end the others'
	finish := func(err error) {
		for _, r := range reqs {
			if err != nil && r.err == nil {
				r.res, r.err = nil, fmt.Errorf("append to %s: %w", r.session, err)
			}
			if r.err == nil && r.after != nil {
				r.after(r.res)
			}
			close(r.done)
		}
	}
	conn, err := s.w.Conn(ctx) // the writer: one connection
	if err != nil {
		finish(err)
		return
	}
	defer conn.Close()
	if s.w.d == sqliteSQL {
		mode := cmp.Or(s.group.synchronous, "FULL")
		if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = "+mode); err != nil {
			finish(err)
			return
		}
		defer conn.ExecContext(ctx, "PRAGMA synchronous = NORMAL")
		var m int64
		if err := conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&m); err != nil {
			finish(err)
			return
		}
		s.group.mode.Store(m)
	}
	t, err := conn.BeginTx(ctx, nil)
	if err != nil {
		finish(err)
		return
	}
	tx := sqlTx{t, s.w.d}
	defer tx.Rollback()
	if len(reqs) == 1 {
		// Alone: the transaction is its savepoint (a savepoint copies
		// every page it changes first).
		r := reqs[0]
		if r.err = r.ctx.Err(); r.err == nil {
			r.res, r.si, r.err = s.appendTx(ctx, tx, r.session, r.items)
		}
		if r.err != nil {
			r.err = fmt.Errorf("append to %s: %w", r.session, r.err)
			finish(nil) // rolled back by the deferred Rollback
			return
		}
		finish(tx.Commit())
		return
	}
	for i, r := range reqs {
		if err := r.ctx.Err(); err != nil {
			r.err = fmt.Errorf("append to %s: %w", r.session, err)
			continue
		}
		sp := "g" + strconv.Itoa(i)
		if _, err := tx.ExecContext(ctx, "SAVEPOINT "+sp); err != nil {
			finish(err)
			return
		}
		res, si, err := s.appendTx(ctx, tx, r.session, r.items)
		if err != nil {
			r.err = fmt.Errorf("append to %s: %w", r.session, err)
			if _, err := tx.ExecContext(ctx, "ROLLBACK TO "+sp); err != nil {
				finish(err)
				return
			}
		}
		r.res, r.si = res, si
		if _, err := tx.ExecContext(ctx, "RELEASE "+sp); err != nil {
			finish(err)
			return
		}
	}
	finish(tx.Commit())
}

// closeGroup stops the committer, after the group it is committing, and
// waits for the appends under way on PostgreSQL.
func (s *Store) closeGroup() {
	s.initGroup()
	s.group.closeOnce.Do(func() { close(s.group.stop) })
	<-s.group.done
	s.group.mu.Lock()
	s.group.closed = true
	s.group.mu.Unlock()
	s.group.running.Wait()
}
