package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
)

// Envelopes are acknowledged only once they would survive power loss: they
// are committed with synchronous=FULL (SQLite fsyncs the WAL at the
// commit), set on the writer connection for the envelope path only (the
// rest of the store stays NORMAL: it survives a crash of the relay). To keep
// that cheap, appends from every connection are committed in groups: one goroutine takes whatever appends are waiting, runs each in
// its own savepoint of one transaction and commits once (one fsync for the
// group). An append that fails rolls back to its savepoint alone.

// MaxGroupAppends bounds the appends (batches) committed together.
const MaxGroupAppends = 64

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
	// commit every append alone).
	max int
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
	// notice is sent with the append if it stores anything (PostgreSQL).
	notice *pgNotice
	res    []Appended
	// info is the session as the append left it, when the engine says it
	// with the append (PostgreSQL); nil otherwise.
	info *SessionInfo
	err  error
	done chan struct{}
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
// as the append left it (nil on SQLite, which does not say it).
func (s *Store) appendNotice(ctx context.Context, session string, items []Item, notice *pgNotice, after func([]Appended)) ([]Appended, *SessionInfo, error) {
	s.initGroup()
	g := &s.group
	req := &appendReq{ctx: ctx, session: session, items: items, after: after, notice: notice, done: make(chan struct{})}
	select {
	case g.ch <- req:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("append to %s: %w", session, ctx.Err())
	case <-g.stop:
		return nil, nil, fmt.Errorf("append to %s: %w", session, errStoreClosed)
	}
	<-req.done // the committer always finishes a request it took
	return req.res, req.info, req.err
}

// commitGroups runs until Close: it takes the appends waiting and commits
// them as one group.
func (s *Store) commitGroups() {
	g := &s.group
	defer close(g.done)
	for {
		var reqs []*appendReq
		select {
		case r := <-g.ch:
			reqs = append(reqs, r)
		case <-g.stop:
			return
		}
		limit := g.max
		if limit <= 0 {
			limit = MaxGroupAppends
		}
		if s.w.d == postgresSQL {
			// One append a transaction: a group would hold several
			// sessions' row locks at once, in an order another node's
			// group could take the other way round (a deadlock).
			limit = 1
		}
	more:
		for len(reqs) < limit {
			select {
			case r := <-g.ch:
				reqs = append(reqs, r)
			default:
				break more
			}
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
	if s.w.d == postgresSQL {
		// One append, one statement in its own transaction (appendpg.go).
		r := reqs[0]
		if r.err = r.ctx.Err(); r.err == nil {
			r.res, r.info, r.err = s.appendPG(ctx, r.session, r.items, r.notice)
		}
		if r.err != nil {
			r.res, r.info, r.err = nil, nil, fmt.Errorf("append to %s: %w", r.session, r.err)
		}
		finish(nil)
		return
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
			r.res, r.err = s.appendTx(ctx, tx, r.session, r.items)
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
		res, err := s.appendTx(ctx, tx, r.session, r.items)
		if err != nil {
			r.err = fmt.Errorf("append to %s: %w", r.session, err)
			if _, err := tx.ExecContext(ctx, "ROLLBACK TO "+sp); err != nil {
				finish(err)
				return
			}
		}
		r.res = res
		if _, err := tx.ExecContext(ctx, "RELEASE "+sp); err != nil {
			finish(err)
			return
		}
	}
	finish(tx.Commit())
}

// closeGroup stops the committer, after the group it is committing.
func (s *Store) closeGroup() {
	s.initGroup()
	s.group.closeOnce.Do(func() { close(s.group.stop) })
	<-s.group.done
}
