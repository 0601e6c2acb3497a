// A session whose CLI is gone: when a CLI connection ends and no CLI
// holds the session again within Limits.CLIGoneAfter, the relay says so in
// the session's summary, so that no list shows a session as working, or a
// machine as running sessions, with no process behind it.

package relay

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// DefaultCLIGoneAfter is how long the relay waits for a session's CLI to
// come back (a network change, a relay restart, a CLI's reconnect backoff)
// before it says in the lists that the session's CLI is gone.
const DefaultCLIGoneAfter = 30 * time.Second

// What the lists say of a session whose CLI is gone (its summary's error).
const (
	// CLIGoneWorking: the session was working (or waiting for a
	// permission answer) when its ccrelay went away; a Claude Code
	// session's words (CLIGoneWorkingAs gives every agent's).
	CLIGoneWorking = "ccrelay stopped relaying this session while Claude was working: its connection to the relay ended and did not come back (ccrelay stopped, or its machine is off or offline). What Claude did after that is not known here. Resume the session to go on."
	// CLIGoneMachine: a machine's daemon went away.
	CLIGoneMachine = "The daemon of this machine is not connected to the relay (it stopped, or the machine is off or offline): a start or stop waits on the relay until it is back; the sessions it ran ended with it or are out of reach too."
)

// CLIGoneWorkingAs is CLIGoneWorking for a session of agent (as agentOf
// gives it: "" for a sealed session, whose agent the relay cannot read).
func CLIGoneWorkingAs(agent string) string {
	switch agent {
	case protocol.AgentClaude:
		return CLIGoneWorking
	case protocol.AgentCodex:
		return "ccrelay stopped relaying this session while Codex was working: its connection to the relay ended and did not come back (ccrelay stopped, or its machine is off or offline). What Codex did after that is not known here. Resume the session to go on."
	}
	return "ccrelay stopped relaying this session while it was working: its connection to the relay ended and did not come back (ccrelay stopped, or its machine is off or offline). What happened after that is not known here. Resume the session to go on."
}

// gone watches the sessions of CLI connections that ended. The watchers
// belong to the server: each ends at its deadline, or when stop is called
// (HTTPServer's base context ended: the relay shuts down, and marks
// nothing, since its CLIs come back to the next relay).
type gone struct {
	once sync.Once
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
	base context.Context // HTTPServer's: its end stops the watchers

	// The sessions of CLI connections that ended, each with its owner and
	// when it is to be marked (its latest CLI's end and CLIGoneAfter): one
	// entry per session however often its CLI comes and goes, watched by
	// one goroutine while there is any.
	mu       sync.Mutex
	pending  map[string]goneMark
	watching bool
	wake     chan struct{}
}

// goneMark is a session waiting to be marked as having no CLI; stopped:
// its CLI closed the connection itself (ccrelay stopped), rather than
// the connection being lost (its machine off or offline, ccrelay killed).
type goneMark struct {
	owner   string
	due     time.Time
	stopped bool
}

func (g *gone) init() {
	g.once.Do(func() {
		g.ctx, g.stop = context.WithCancel(context.Background())
		g.pending, g.wake = map[string]goneMark{}, make(chan struct{}, 1)
	})
}

// stopGone ends the watchers; Wait waits for them after the connections.
func (s *Server) stopGone() {
	s.gone.init()
	s.gone.stop()
}

// cliGone watches sessions, which the CLI connection of owner held until it
// ended (stopped: closed by the CLI, a normal closure): those that no CLI
// holds again within Limits.CLIGoneAfter are marked (markCLIGone). A
// session already watched is watched from this end on; a CLI that
// reconnects again and again adds no watcher.
func (s *Server) cliGone(owner string, sessions []string, stopped bool) {
	if len(sessions) == 0 || s.store == nil {
		return
	}
	g := &s.gone
	g.init()
	if g.ctx.Err() != nil {
		return
	}
	if stopped {
		// Said in the store too: a relay that stops before the mark is
		// made leaves it to the next one (sweepGone).
		if err := s.store.markStopped(g.ctx, sessions); err != nil && g.ctx.Err() == nil {
			s.log.Warn("could not record that a CLI stopped", "err", err)
		}
	}
	due := time.Now().Add(s.Limits.withDefaults().CLIGoneAfter)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, session := range sessions {
		g.pending[session] = goneMark{owner: owner, due: due, stopped: stopped}
	}
	if g.watching {
		select {
		case g.wake <- struct{}{}:
		default:
		}
		return
	}
	g.watching = true
	g.wg.Go(s.watchGone)
}

// watchGone marks the pending sessions as they fall due, and ends when
// none is left or the watchers are stopped.
func (s *Server) watchGone() {
	g := &s.gone
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		now := time.Now()
		var due []string
		var marks []goneMark
		var next time.Time
		g.mu.Lock()
		for session, m := range g.pending {
			if !m.due.After(now) {
				due, marks = append(due, session), append(marks, m)
				delete(g.pending, session)
			} else if next.IsZero() || m.due.Before(next) {
				next = m.due
			}
		}
		if len(due) == 0 && len(g.pending) == 0 {
			g.watching = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		for i, session := range due {
			if g.ctx.Err() != nil {
				return
			}
			if err := s.markCLIGone(withOwner(g.ctx, marks[i].owner), session, marks[i].stopped); err != nil && g.ctx.Err() == nil {
				s.storeFailed("mark a session whose CLI is gone", session, err)
			}
		}
		if next.IsZero() {
			continue // more may have come meanwhile: looked at again
		}
		t.Reset(time.Until(next))
		select {
		case <-g.ctx.Done():
			return
		case <-g.wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// sweepGone, once the relay serves (HTTPServer), marks the sessions that
// no CLI holds within Limits.CLIGoneAfter of the start: those a CLI held
// when the relay before stopped (cli_held; as stopped where that CLI had
// closed its connection itself), whose CLI went away while no relay ran
// (or this one restarted), which no connection's end will tell; and,
// whatever held them, the sessions listed as working and the machines,
// which no list may show as running with nothing behind them. An idle
// session that no CLI held then (it ended before, or under a relay from
// before cli_held) keeps its state.
func (s *Server) sweepGone() {
	if s.store == nil {
		return
	}
	s.gone.init()
	after := s.Limits.withDefaults().CLIGoneAfter
	s.gone.wg.Go(func() {
		t := time.NewTimer(after)
		defer t.Stop()
		select {
		case <-s.gone.ctx.Done():
			return
		case <-t.C:
		}
		marks, err := s.store.heldMarks(s.gone.ctx)
		if err != nil {
			if s.gone.ctx.Err() == nil {
				s.storeFailed("list the sessions whose CLI may be gone", "", err)
			}
			return
		}
		list, err := s.store.Sessions(s.gone.ctx)
		if err != nil {
			if s.gone.ctx.Err() == nil {
				s.storeFailed("list the sessions whose CLI may be gone", "", err)
			}
			return
		}
		for _, si := range list {
			mark, held := marks[si.ID]
			delete(marks, si.ID)
			if !held {
				if !alwaysSwept(si.Info) {
					continue
				}
				mark.owner = si.Owner
			}
			s.sweepOne(si.ID, mark)
		}
		for session, mark := range marks {
			s.sweepOne(session, mark) // deleted meanwhile: its row goes
		}
	})
}

// sweepOne marks session for sweepGone, unless a CLI that held it here
// and left has its own grace (cliGone), which may end after the sweep.
func (s *Server) sweepOne(session string, mark heldMark) {
	if s.gone.ctx.Err() != nil {
		return
	}
	s.gone.mu.Lock()
	_, pending := s.gone.pending[session]
	s.gone.mu.Unlock()
	if pending {
		return
	}
	if err := s.markCLIGone(withOwner(s.gone.ctx, mark.owner), session, mark.stopped); err != nil && s.gone.ctx.Err() == nil {
		s.storeFailed("mark a session whose CLI is gone", session, err)
	}
}

// alwaysSwept reports whether a starting relay marks a session of info
// that no CLI held when the relay before stopped: a session listed as
// working or waiting for an answer, or a machine, not marked yet.
func alwaysSwept(info json.RawMessage) bool {
	var m struct {
		Mode    string `json:"mode"`
		Status  string `json:"status"`
		CLIGone *int64 `json:"cliGone"`
	}
	if json.Unmarshal(info, &m) != nil || m.CLIGone != nil {
		return false
	}
	return m.Mode == "machine" || m.Status == "busy" || m.Status == "waiting-for-permission"
}

// markCLIGone says in session's summary that its CLI is gone, unless a
// CLI holds it again (here or on another relay): a session that was
// working or waiting for an answer becomes idle with the reason; an idle
// one is marked as it is; a machine's daemon is shown gone and running
// nothing. The summary is replaced only if it is still the one read: a
// CLI that announced itself meanwhile is right, and its next announcement
// replaces this one.
func (s *Server) markCLIGone(ctx context.Context, session string, stopped bool) error {
	// Before the look at who holds it: a CLI that takes it after leaves
	// its row in cli_held (dropHeld).
	now := s.store.clock().UnixMilli()
	s.peersMu.Lock()
	_, held := s.owners[session]
	s.peersMu.Unlock()
	if held || s.heldElsewhere(ctx, session) {
		s.log.Debug("a session's CLI came back in time", "session", session, "here", held)
		return nil
	}
	// Settled once the summary says it (or there is nothing to say).
	settled := func() error { return s.store.dropHeld(ctx, session, now) }
	si, err := s.store.session(ctx, session)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return settled() // deleted meanwhile
		}
		return err
	}
	marked, ok := cliGoneInfo(si.Info, now, stopped)
	if !ok {
		return settled()
	}
	si, swapped, err := s.store.replaceInfo(ctx, session, si.Info, marked)
	if err != nil {
		return err
	}
	if err := settled(); err != nil {
		return err
	}
	if !swapped {
		return nil
	}
	s.log.Info("a session's CLI did not come back: the lists say so", "session", session)
	s.pushCLIGone(ctx, si)
	s.hub.sessionChanged(si)
	s.fanSend(ctx, fanMsg{Kind: "s", Session: session, Owner: si.Owner})
	s.told(session)
	return nil
}

// cliGoneInfo is a session summary marked as having no CLI (cliGone: when
// it was marked, Unix ms; cliStopped: its CLI closed its connection
// itself, ccrelay stopped), and whether there is anything to mark: a
// session working or waiting for a permission answer (status idle, the
// permission requests dropped, error the reason), an idle session (marked
// only: its status and error stay), or a machine (error the reason, its
// running sessions none). A summary without a mode (a session no ccrelay
// announced) or a recording has nothing to mark. A sealed summary keeps
// its sealed part, which the relay cannot read: its readable status and
// error say it.
func cliGoneInfo(info json.RawMessage, now int64, stopped bool) (json.RawMessage, bool) {
	var m map[string]any
	if json.Unmarshal(info, &m) != nil || m == nil {
		return nil, false
	}
	if _, done := m["cliGone"]; done {
		return nil, false
	}
	switch {
	case m["mode"] == "machine":
		m["error"] = CLIGoneMachine
		if d, ok := m["daemon"].(map[string]any); ok {
			d["running"] = []string{}
		}
	case m["recording"] == true:
		return nil, false
	case m["status"] == "busy" || m["status"] == "waiting-for-permission":
		m["status"] = "idle"
		m["error"] = CLIGoneWorkingAs(agentOf(info))
		delete(m, "permissions")
	default:
		if mode, _ := m["mode"].(string); mode == "" {
			return nil, false
		}
	}
	m["cliGone"] = now
	if stopped && m["mode"] != "machine" {
		m["cliStopped"] = true
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, false
	}
	return b, true
}

// replaceInfo replaces session's summary with info if it is still was (a
// CLI's announcement meanwhile wins), without counting as activity; it
// returns the session and whether it was replaced.
func (s *Store) replaceInfo(ctx context.Context, session string, was, info json.RawMessage) (SessionInfo, bool, error) {
	res, err := s.w.ExecContext(ctx, `UPDATE sessions SET info = ? WHERE id = ? AND info = ?`, string(info), session, string(was))
	if err != nil {
		return SessionInfo{}, false, fmt.Errorf("replace the summary of %s: %w", session, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return SessionInfo{}, false, err
	}
	si, err := s.session(ctx, session)
	return si, err == nil, err
}
