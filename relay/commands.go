package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// Limits of the command queue (docs/protocol.md, "Limits: fields and
// sizes").
const (
	// MaxQueuedPrompts is how many prompts may wait for a session's CLI;
	// one more is rejected.
	MaxQueuedPrompts = 32
	// QueuedPromptTTL is how long a prompt waits for its CLI; it is then
	// rejected.
	QueuedPromptTTL = 24 * time.Hour
	// CommandRetention is how long a command that reached done or rejected
	// is kept (a resent id is answered with its status meanwhile).
	CommandRetention = 7 * 24 * time.Hour
)

// cmdKey names a command in the relay's maps: an id is unique only within
// its owner's session (owner ids are hex, session ids UUIDs, command ids
// cuid2s: none holds a '/').
func cmdKey(owner, session, id string) string { return owner + "/" + session + "/" + id }

func splitCmdKey(k string) (owner, session, id string) {
	p := strings.SplitN(k, "/", 3)
	if len(p) != 3 {
		return "", "", k
	}
	return p[0], p[1], p[2]
}

// setOwner makes cli the owner of session (commands go to it from now on)
// and reports whether it is new in that role.
func (s *Server) setOwner(session string, cli *peer) bool {
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	prev := s.owners[session]
	s.owners[session] = cli
	return prev != cli
}

// deliverQueued hands a session's queued commands to its new owner.
func (s *Server) deliverQueued(ctx context.Context, session string, cli *peer) {
	owner := ownerFrom(ctx)
	s.cmdMu.Lock()
	defer s.cmdMu.Unlock()
	s.sweepCommands(ctx)
	queued, err := s.store.QueuedCommands(ctx, owner, session)
	if err != nil {
		s.storeFailed("queued commands", session, err)
		return
	}
	for _, q := range queued {
		var cmd protocol.Command
		if json.Unmarshal(q.Body, &cmd) != nil {
			continue
		}
		if !s.handOver(ctx, cli, owner, session, &cmd) {
			return
		}
		s.commandStatus(ctx, owner, session, cmd.ID, protocol.StatusDelivered, "")
	}
}

// handOver sends a command to cli, recorded as delivered to it first (the
// CLI may answer before send returns), and reports whether it was sent.
func (s *Server) handOver(ctx context.Context, cli *peer, owner, session string, cmd *protocol.Command) bool {
	key := cmdKey(owner, session, cmd.ID)
	s.peersMu.Lock()
	s.delivered[key] = delivery{cli: cli, session: session}
	s.peersMu.Unlock()
	if cli.send(ctx, protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: cmd}) != nil {
		s.peersMu.Lock()
		if d, ok := s.delivered[key]; ok && d.cli == cli {
			delete(s.delivered, key)
		}
		s.peersMu.Unlock()
		return false
	}
	return true
}

// answer records a CLI's result for a command of the request's session,
// if that command was delivered to cli and is not answered yet (a CLI
// answers only those). It waits for the command's hand-over to be recorded
// (cmdMu), so that a quick answer is not overwritten by "delivered".
func (s *Server) answer(ctx context.Context, cli *peer, f protocol.Frame) bool {
	owner := ownerFrom(ctx)
	s.cmdMu.Lock()
	defer s.cmdMu.Unlock()
	s.peersMu.Lock()
	d, ok := s.delivered[cmdKey(owner, f.Session, f.Command.ID)]
	s.peersMu.Unlock()
	if !ok || d.cli != cli {
		return false
	}
	s.commandStatus(ctx, owner, f.Session, f.Command.ID, f.Status, f.Message)
	return true
}

// disown forgets cli as the owner of its sessions. Commands it received
// and never answered go back to the queue (prompts, delivered again to the
// next CLI: at least once, the id lets a CLI drop a repeat) or are rejected.
func (s *Server) disown(cli *peer) {
	s.peersMu.Lock()
	for session, p := range s.owners {
		if p == cli {
			delete(s.owners, session)
		}
	}
	var pending []string
	for k, d := range s.delivered {
		if d.cli == cli {
			pending = append(pending, k)
			delete(s.delivered, k)
		}
	}
	s.peersMu.Unlock()
	ctx := context.Background()
	s.cmdMu.Lock()
	defer s.cmdMu.Unlock()
	for _, k := range pending {
		owner, session, id := splitCmdKey(k)
		c, err := s.store.Command(ctx, owner, session, id)
		if err != nil {
			s.storeFailed("command", session, err)
			continue
		}
		var cmd protocol.Command
		if json.Unmarshal(c.Body, &cmd) == nil && cmd.Kind == protocol.CommandPrompt {
			s.commandStatus(ctx, owner, session, id, protocol.StatusQueued, "")
			// Another CLI may own the session by now: hand it over.
			s.peersMu.Lock()
			next := s.owners[session]
			s.peersMu.Unlock()
			if next != nil && s.handOver(ctx, next, owner, session, &cmd) {
				s.commandStatus(ctx, owner, session, id, protocol.StatusDelivered, "")
			}
		} else {
			s.commandStatus(ctx, owner, session, id, protocol.StatusRejected, "the CLI disconnected before answering")
		}
	}
}

// command takes a command from an app: stored once per id in its session,
// handed to the CLI that owns the session, or queued (prompts, up to
// MaxQueuedPrompts) or rejected (everything else) while no CLI is connected
// for it.
func (s *Server) command(ctx context.Context, app *peer, f protocol.Frame) error {
	cmd := f.Command
	if err := checkSession(f.Session); err != nil {
		return app.send(ctx, errorFrame("bad-command", "%v", err))
	}
	if cmd == nil {
		return app.send(ctx, errorFrame("bad-command", "a command frame needs a command"))
	}
	if err := cmd.Validate(); err != nil {
		return app.send(ctx, errorFrame("bad-command", "%v", err))
	}
	body, _ := json.Marshal(cmd)
	if len(body) > protocol.MaxCommandBytes {
		return app.send(ctx, errorFrame("bad-command", "the command is %d bytes, more than %d", len(body), protocol.MaxCommandBytes))
	}
	if err := s.mine(ctx, f.Session); err != nil {
		return app.send(ctx, errorFrame("not-found", "no session %s for this token", f.Session))
	}
	owner := ownerFrom(ctx)
	s.cmdMu.Lock()
	defer s.cmdMu.Unlock()
	s.sweepCommands(ctx)
	status, message := protocol.StatusQueued, ""
	if cmd.Kind == protocol.CommandPrompt {
		n, err := s.store.CountQueued(ctx, owner, f.Session)
		if err != nil {
			s.storeFailed("count queued commands", f.Session, err)
			return app.send(ctx, errorFrame("store", "%v", err))
		}
		if n >= MaxQueuedPrompts {
			status, message = protocol.StatusRejected, fmt.Sprintf("%d prompts already wait for this session's CLI (at most %d)", n, MaxQueuedPrompts)
		}
	}
	stored, isNew, err := s.store.AddCommand(ctx, owner, f.Session, cmd.ID, body, status, message)
	if err != nil {
		s.storeFailed("add command", f.Session, err)
		return app.send(ctx, errorFrame("store", "%v", err))
	}
	if !isNew || status == protocol.StatusRejected { // a resend, or refused: say where it stands
		return app.send(ctx, protocol.Frame{Type: protocol.FrameStatus, Session: f.Session, Command: &protocol.Command{ID: cmd.ID}, Status: stored.Status, Message: stored.Message})
	}
	key := cmdKey(owner, f.Session, cmd.ID)
	s.peersMu.Lock()
	s.watchers[key] = app
	cli := s.owners[f.Session]
	s.peersMu.Unlock()
	switch {
	case cli != nil && s.handOver(ctx, cli, owner, f.Session, cmd):
		s.commandStatus(ctx, owner, f.Session, cmd.ID, protocol.StatusDelivered, "")
	case cmd.Kind == protocol.CommandPrompt:
		s.commandStatus(ctx, owner, f.Session, cmd.ID, protocol.StatusQueued, "")
	default:
		s.commandStatus(ctx, owner, f.Session, cmd.ID, protocol.StatusRejected, "no CLI is connected for this session")
	}
	return nil
}

// sweepCommands rejects the prompts that waited longer than
// QueuedPromptTTL (telling their apps) and deletes the commands that
// reached done or rejected more than CommandRetention ago. Called with
// cmdMu held, whenever commands are taken or handed out.
func (s *Server) sweepCommands(ctx context.Context) {
	now := s.store.clock()
	expired, err := s.store.ExpireQueued(ctx, now.Add(-QueuedPromptTTL), fmt.Sprintf("no CLI took this prompt within %v", QueuedPromptTTL))
	if err != nil {
		s.storeFailed("expire queued commands", "", err)
	}
	for _, c := range expired {
		s.notify(ctx, c.Owner, c.Session, c.ID, c.Status, c.Message)
	}
	if _, err := s.store.PruneCommands(ctx, now.Add(-CommandRetention)); err != nil {
		s.storeFailed("prune commands", "", err)
	}
}

// commandStatus records a command's status and tells the app that sent it.
// An answered command is no longer pending on the CLI it was delivered to.
func (s *Server) commandStatus(ctx context.Context, owner, session, id, status, message string) {
	if status == protocol.StatusDone || status == protocol.StatusRejected {
		s.peersMu.Lock()
		delete(s.delivered, cmdKey(owner, session, id))
		s.peersMu.Unlock()
	}
	if err := s.store.SetCommandStatus(ctx, owner, session, id, status, message); err != nil {
		s.storeFailed("command status", session, err)
	}
	s.notify(ctx, owner, session, id, status, message)
}

// notify tells the app that sent a command where it stands.
func (s *Server) notify(ctx context.Context, owner, session, id, status, message string) {
	key := cmdKey(owner, session, id)
	s.peersMu.Lock()
	app := s.watchers[key]
	if status == protocol.StatusDone || status == protocol.StatusRejected {
		delete(s.watchers, key)
	}
	s.peersMu.Unlock()
	if app != nil {
		_ = app.send(ctx, protocol.Frame{Type: protocol.FrameStatus, Session: session, Command: &protocol.Command{ID: id}, Status: status, Message: message})
	}
}

// claim makes the request's token the owner of session, or fails if the
// session belongs to another token. Call it only for a validated frame: a
// claim creates the session.
func (s *Server) claim(ctx context.Context, session string) error {
	return s.store.Claim(ctx, session, ownerFrom(ctx))
}

// mine fails unless session exists and belongs to the request's token.
func (s *Server) mine(ctx context.Context, session string) error {
	owner, err := s.store.OwnerOf(ctx, session)
	if err != nil {
		return err
	}
	if owner != ownerFrom(ctx) {
		return ErrForbidden
	}
	return nil
}
