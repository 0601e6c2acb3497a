package relay

import (
	"context"
	"encoding/json"

	"github.com/ccrelay/ccrelay/protocol"
)

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
	s.cmdMu.Lock()
	defer s.cmdMu.Unlock()
	queued, err := s.store.QueuedCommands(ctx, session)
	if err != nil {
		s.log.Warn("queued commands", "session", session, "err", err)
		return
	}
	for _, q := range queued {
		var cmd protocol.Command
		if json.Unmarshal(q.Body, &cmd) != nil {
			continue
		}
		if cli.send(ctx, protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &cmd}) != nil {
			return
		}
		s.markDelivered(cli, session, cmd.ID)
		s.commandStatus(ctx, session, cmd.ID, protocol.StatusDelivered, "")
	}
}

func (s *Server) markDelivered(cli *peer, session, id string) {
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	s.delivered[id] = delivery{cli: cli, session: session}
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
	pending := map[string]string{}
	for id, d := range s.delivered {
		if d.cli == cli {
			pending[id] = d.session
			delete(s.delivered, id)
		}
	}
	s.peersMu.Unlock()
	ctx := context.Background()
	s.cmdMu.Lock()
	defer s.cmdMu.Unlock()
	for id, session := range pending {
		c, err := s.store.Command(ctx, id)
		if err != nil {
			continue
		}
		var cmd protocol.Command
		if json.Unmarshal(c.Body, &cmd) == nil && cmd.Kind == protocol.CommandPrompt {
			s.commandStatus(ctx, session, id, protocol.StatusQueued, "")
			// Another CLI may own the session by now: hand it over.
			s.peersMu.Lock()
			owner := s.owners[session]
			s.peersMu.Unlock()
			if owner != nil && owner.send(ctx, protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &cmd}) == nil {
				s.markDelivered(owner, session, id)
				s.commandStatus(ctx, session, id, protocol.StatusDelivered, "")
			}
		} else {
			s.commandStatus(ctx, session, id, protocol.StatusRejected, "the CLI disconnected before answering")
		}
	}
}

// command takes a command from an app: stored once per id, handed to the
// CLI that owns the session, or queued (prompts) or rejected (everything
// else) while no CLI is connected for it.
func (s *Server) command(ctx context.Context, app *peer, f protocol.Frame) error {
	cmd := f.Command
	if f.Session == "" || cmd == nil || cmd.ID == "" || !protocol.ValidCommandKind(cmd.Kind) {
		return app.send(ctx, errorFrame("bad-command", "a command needs a session, an id and a known kind"))
	}
	if err := s.mine(ctx, f.Session); err != nil {
		return app.send(ctx, errorFrame("not-found", "no session %s for this token", f.Session))
	}
	body, _ := json.Marshal(cmd)
	s.cmdMu.Lock()
	defer s.cmdMu.Unlock()
	stored, isNew, err := s.store.AddCommand(ctx, f.Session, cmd.ID, body, protocol.StatusQueued)
	if err != nil {
		return app.send(ctx, errorFrame("store", "%v", err))
	}
	if !isNew { // a resend: say where it stands
		return app.send(ctx, protocol.Frame{Type: protocol.FrameStatus, Session: stored.Session, Command: &protocol.Command{ID: cmd.ID}, Status: stored.Status, Message: stored.Message})
	}
	s.peersMu.Lock()
	s.watchers[cmd.ID] = app
	owner := s.owners[f.Session]
	s.peersMu.Unlock()
	switch {
	case owner != nil && owner.send(ctx, protocol.Frame{Type: protocol.FrameCommand, Session: f.Session, Command: cmd}) == nil:
		s.markDelivered(owner, f.Session, cmd.ID)
		s.commandStatus(ctx, f.Session, cmd.ID, protocol.StatusDelivered, "")
	case cmd.Kind == protocol.CommandPrompt:
		s.commandStatus(ctx, f.Session, cmd.ID, protocol.StatusQueued, "")
	default:
		s.commandStatus(ctx, f.Session, cmd.ID, protocol.StatusRejected, "no CLI is connected for this session")
	}
	return nil
}

// commandStatus records a command's status and tells the app that sent it.
// An answered command is no longer pending on the CLI it was delivered to.
func (s *Server) commandStatus(ctx context.Context, session, id, status, message string) {
	if status == protocol.StatusDone || status == protocol.StatusRejected {
		s.peersMu.Lock()
		delete(s.delivered, id)
		s.peersMu.Unlock()
	}
	if err := s.store.SetCommandStatus(ctx, id, status, message); err != nil {
		s.log.Warn("command status", "id", id, "err", err)
	}
	s.peersMu.Lock()
	app := s.watchers[id]
	if status == protocol.StatusDone || status == protocol.StatusRejected {
		delete(s.watchers, id)
	}
	s.peersMu.Unlock()
	if app != nil {
		_ = app.send(ctx, protocol.Frame{Type: protocol.FrameStatus, Session: session, Command: &protocol.Command{ID: id}, Status: status, Message: message})
	}
}

// claim makes the request's token the owner of session, or fails if the
// session belongs to another token.
func (s *Server) claim(ctx context.Context, session string) error {
	if session == "" {
		return nil // the batch is refused as malformed later
	}
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
