package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ccrelay/ccrelay/internal/crashpoint"
	"github.com/ccrelay/ccrelay/protocol"
)

// Limits of the command queue (docs/protocol.md, "Limits: fields and
// sizes").
const (
	// MaxQueuedPrompts is how many prompts may wait for a session's CLI;
	// one more is rejected.
	MaxQueuedPrompts = 64
	// QueuedPromptTTL is how long a command waits for a CLI's answer
	// (queued, or delivered and not answered); it is then rejected.
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

// routes is where commands go: which CLI connection owns each session,
// which command was handed to which connection, and which app connections
// follow each session's commands. peersMu guards the maps only; nothing
// waits on a socket under it (frames go through each peer's queue).
type routes struct {
	cmdMu     sync.Mutex // taking and handing out commands is one at a time: no double delivery
	statusMu  sync.Mutex // a status change is told in the order it is stored
	peersMu   sync.Mutex
	owners    map[string]*peer              // session -> the CLI connection that owns it
	followers map[string]map[*peer]struct{} // owner/session -> app connections told its commands' statuses
	delivered map[string]*peer              // owner/session/id -> the CLI it was handed to, not answered yet
	// catchingUp: session -> its new owner, until the commands queued
	// before it claimed the session are handed to it (deliverQueued): a
	// command an app sends meanwhile goes after them, in the order sent.
	catchingUp map[string]*peer
	clis       map[*peer]struct{}            // every CLI connection (told its account's devices)
	apps       map[string]map[*peer]struct{} // device credential id -> its app connections (given its session keys as they come)

	// beforeDelivered, when set (tests), runs after a command is handed to
	// a CLI and before "delivered" is recorded.
	beforeDelivered atomic.Pointer[func(id string)]
	// shown, when set (tests), runs when the apps are told of a session's
	// announce or envelopes.
	shown atomic.Pointer[func(session string)]
}

func newRoutes() routes {
	return routes{owners: map[string]*peer{}, followers: map[string]map[*peer]struct{}{}, delivered: map[string]*peer{}, catchingUp: map[string]*peer{},
		clis: map[*peer]struct{}{}, apps: map[string]map[*peer]struct{}{}}
}

// told runs the shown hook (tests).
func (s *Server) told(session string) {
	if hook := s.shown.Load(); hook != nil {
		(*hook)(session)
	}
}

// setOwner makes cli the owner of session (commands go to it from now on)
// and reports whether it is new in that role.
func (s *Server) setOwner(ctx context.Context, session string, cli *peer) bool {
	s.peersMu.Lock()
	prev := s.owners[session]
	s.owners[session] = cli
	if prev != cli {
		s.catchingUp[session] = cli
	}
	s.peersMu.Unlock()
	if prev != cli {
		s.present(ctx, session, true) // other relays route its commands here
		if s.store != nil {
			// The next start marks it if the relay stops while it is held.
			if err := s.store.markHeld(ctx, session, cli.owner); err != nil && ctx.Err() == nil {
				s.log.Warn("could not record that a CLI holds a session", "session", session, "err", err)
			}
		}
	}
	return prev != cli
}

// follow makes app hear the statuses of the commands of the owner's
// session, from now on, until it disconnects.
func (s *Server) follow(app *peer, session string) {
	k := app.owner + "/" + session
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	if s.followers[k] == nil {
		s.followers[k] = map[*peer]struct{}{}
	}
	s.followers[k][app] = struct{}{}
}

// addApp records an app connection of a device, which gets the keys
// its machines wrap for it while it is connected, whatever it shows.
func (s *Server) addApp(app *peer) {
	if app.device == "" {
		return
	}
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	if s.apps[app.device] == nil {
		s.apps[app.device] = map[*peer]struct{}{}
	}
	s.apps[app.device][app] = struct{}{}
}

// appsOf are the app connections of device, of owner, here.
func (s *Server) appsOf(owner, device string) []*peer {
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	var out []*peer
	for p := range s.apps[device] {
		if p.owner == owner {
			out = append(out, p)
		}
	}
	return out
}

// unfollow forgets an app connection that ended.
func (s *Server) unfollow(app *peer) {
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	if as := s.apps[app.device]; as != nil {
		delete(as, app)
		if len(as) == 0 {
			delete(s.apps, app.device)
		}
	}
	for k, fs := range s.followers {
		delete(fs, app)
		if len(fs) == 0 {
			delete(s.followers, k)
		}
	}
}

// deliverQueued hands a session's new owner every command of the session
// that no CLI answered yet, oldest first: those queued, and those handed to
// an earlier CLI that did not answer (its answer may have been lost with
// the connection: the CLI answers a repeat with the outcome it recorded).
func (s *Server) deliverQueued(ctx context.Context, session string, cli *peer) {
	s.deliverQueuedFor(ctx, ownerFrom(ctx), session, cli)
}

// deliverQueuedFor is deliverQueued for the owner's session.
func (s *Server) deliverQueuedFor(ctx context.Context, owner, session string, cli *peer) {
	s.cmdMu.Lock()
	defer s.cmdMu.Unlock()
	s.sweepCommands(ctx)
	s.handOverPending(ctx, owner, session, cli)
	s.peersMu.Lock()
	if s.catchingUp[session] == cli {
		delete(s.catchingUp, session)
	}
	s.peersMu.Unlock()
}

// handOverPending hands cli every command of the owner's session that no
// CLI answered yet and cli was not handed, oldest first. cmdMu is held.
func (s *Server) handOverPending(ctx context.Context, owner, session string, cli *peer) {
	pending, err := s.store.PendingCommands(ctx, owner, session)
	if err != nil {
		s.storeFailed("pending commands", session, err)
		return
	}
	for _, q := range pending {
		var cmd protocol.Command
		if json.Unmarshal(q.Body, &cmd) != nil {
			continue
		}
		// A command an app sent between this CLI's claim and now went to
		// it already (command runs under cmdMu too): not twice.
		s.peersMu.Lock()
		already := s.delivered[cmdKey(owner, session, cmd.ID)] == cli
		s.peersMu.Unlock()
		if already {
			continue
		}
		if !s.handOver(ctx, cli, owner, session, &cmd) {
			return
		}
	}
}

// handOver queues a command for cli and records it delivered, and reports
// whether it was queued (false: cli's queue is full, and cli is dropped).
func (s *Server) handOver(ctx context.Context, cli *peer, owner, session string, cmd *protocol.Command) bool {
	key := cmdKey(owner, session, cmd.ID)
	s.peersMu.Lock()
	s.delivered[key] = cli
	s.peersMu.Unlock()
	if !cli.send(protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: cmd}) {
		s.peersMu.Lock()
		if s.delivered[key] == cli {
			delete(s.delivered, key)
		}
		s.peersMu.Unlock()
		return false
	}
	if hook := s.beforeDelivered.Load(); hook != nil {
		(*hook)(cmd.ID)
	}
	// The CLI may have answered already: then this changes nothing.
	s.commandStatus(ctx, owner, session, cmd.ID, protocol.StatusDelivered, "")
	return true
}

// ResultMessageNotKept is what the relay keeps, and passes on, in place
// of a readable reason in a result for a sealed session.
const ResultMessageNotKept = "the machine gave its reason readable (a ccrelay older than end-to-end encrypted reasons), so the relay did not keep it: update ccrelay on that machine to see it here"

// errNotDelivered is why a CLI's result is refused.
var errNotDelivered = errors.New("not delivered to this connection, or answered already")

// answer records a CLI's result for a command of the request's session
// that was handed to cli (or whose session cli owns), and that is not
// answered yet. The same result again is accepted (a CLI resends a result
// whose acknowledgement it lost); another one is refused.
func (s *Server) answer(ctx context.Context, cli *peer, f protocol.Frame) error {
	owner := ownerFrom(ctx)
	key := cmdKey(owner, f.Session, f.Command.ID)
	s.peersMu.Lock()
	ok := s.delivered[key] == cli || s.owners[f.Session] == cli
	s.peersMu.Unlock()
	if !ok {
		return errNotDelivered
	}
	message := f.Message
	if f.SealedMessage == "" && message != "" && message != protocol.SealedResultMessage {
		// A sealed session's machine seals its reasons: a readable one
		// (a ccrelay from before that) is neither kept nor passed on.
		sealed, err := s.store.SessionSealed(ctx, f.Session)
		if err != nil {
			s.storeFailed("is the session sealed", f.Session, err)
			return errNotDelivered
		}
		if sealed {
			message = ResultMessageNotKept
		}
	}
	moved, c, err := s.commandResult(ctx, owner, f.Session, f.Command.ID, f.Status, message, f.SealedMessage)
	switch {
	case err != nil:
		return errNotDelivered
	case !moved && c.Status != f.Status:
		return errNotDelivered
	}
	return nil
}

// disown forgets cli as the owner of its sessions, and returns them. What
// it was handed and did not answer stays delivered, never goes back: the
// session's next owner gets it again (deliverQueued).
func (s *Server) disown(ctx context.Context, cli *peer) (gone []string) {
	// Other relays stop routing its sessions here first: once this relay
	// holds no owner for a session, no other relay keeps a command for it.
	s.peersMu.Lock()
	for session, p := range s.owners {
		if p == cli {
			gone = append(gone, session)
		}
	}
	s.peersMu.Unlock()
	for _, session := range gone {
		s.present(ctx, session, false)
	}
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	for _, session := range gone {
		if s.owners[session] == cli {
			delete(s.owners, session)
		}
		if s.catchingUp[session] == cli {
			delete(s.catchingUp, session)
		}
	}
	for k, p := range s.delivered {
		if p == cli {
			delete(s.delivered, k)
		}
	}
	return gone
}

// command takes a command from an app: stored once per id in its session,
// handed to the CLI that owns the session, or queued (prompts, up to
// MaxQueuedPrompts) or rejected (everything else) while no CLI is connected
// for it. The app follows the session's command statuses from then on.
func (s *Server) command(ctx context.Context, app *peer, f protocol.Frame) error {
	cmd := f.Command
	if err := checkSession(f.Session); err != nil {
		return writeFrame(ctx, app.c, errorFrame("bad-command", "%v", err))
	}
	if cmd == nil {
		return writeFrame(ctx, app.c, errorFrame("bad-command", "a command frame needs a command"))
	}
	if err := cmd.Validate(); err != nil {
		return writeFrame(ctx, app.c, errorFrame("bad-command", "%v", err))
	}
	body, _ := json.Marshal(cmd)
	if len(body) > protocol.MaxCommandBytes {
		return writeFrame(ctx, app.c, errorFrame("bad-command", "the command is %d bytes, more than %d", len(body), protocol.MaxCommandBytes))
	}
	if err := s.mine(ctx, f.Session); err != nil {
		return writeFrame(ctx, app.c, errorFrame("not-found", "no session %s for this token", f.Session))
	}
	if cmd.Sealed == "" {
		// A session whose machine seals takes sealed commands only: a
		// plaintext one is neither stored nor handed on (nor logged), and
		// the app is told why.
		sealed, err := s.store.SessionSealed(ctx, f.Session)
		if err != nil {
			s.storeFailed("is the session sealed", f.Session, err)
			return writeFrame(ctx, app.c, errorFrame("store", "the relay's store failed"))
		}
		if sealed {
			e := errorFrame(CodeNotSealed, "this session is end-to-end encrypted: the relay takes only sealed commands for it, and this one was not sealed (the device has no key for the session). It was not stored or sent on. Pair this device with the machine that runs the session (ccrelay pair there), or ask that machine to share the session's key again.")
			e.Session = f.Session
			e.Command = &protocol.Command{ID: cmd.ID, Kind: cmd.Kind}
			return writeFrame(ctx, app.c, e)
		}
	}
	s.follow(app, f.Session)
	owner := ownerFrom(ctx)
	s.cmdMu.Lock()
	defer s.cmdMu.Unlock()
	s.sweepCommands(ctx)
	status, message := protocol.StatusQueued, ""
	if queueable(cmd.Kind) {
		n, err := s.store.CountQueued(ctx, owner, f.Session)
		if err != nil {
			s.storeFailed("count queued commands", f.Session, err)
			app.send(errorFrame("store", "%v", err)) // queued: cmdMu is held
			return nil
		}
		if n >= MaxQueuedPrompts {
			status, message = protocol.StatusRejected, fmt.Sprintf("%d prompts already wait for this session's CLI (at most %d)", n, MaxQueuedPrompts)
		}
	}
	stored, isNew, err := s.store.AddCommand(ctx, owner, f.Session, cmd.ID, body, status, message)
	if err != nil {
		s.storeFailed("add command", f.Session, err)
		app.send(errorFrame("store", "%v", err))
		return nil
	}
	if isNew {
		crashpoint.Hit(crashpoint.RelayCommandAdded)
	}
	if !isNew || status == protocol.StatusRejected { // a resend, or refused: say where it stands
		app.send(protocol.Frame{Type: protocol.FrameStatus, Session: f.Session, Command: &protocol.Command{ID: cmd.ID}, Status: stored.Status, Message: stored.Message, SealedMessage: stored.Sealed})
		return nil
	}
	s.peersMu.Lock()
	cli := s.owners[f.Session]
	catchingUp := cli != nil && s.catchingUp[f.Session] == cli
	s.peersMu.Unlock()
	handed := false
	switch {
	case catchingUp:
		// The CLI claimed the session and the commands queued before are
		// not handed to it yet: they go first, then this one (stored
		// queued, it is the newest pending), in the order sent.
		s.handOverPending(ctx, owner, f.Session, cli)
		s.peersMu.Lock()
		handed = s.delivered[cmdKey(owner, f.Session, cmd.ID)] == cli
		s.peersMu.Unlock()
	case cli != nil:
		handed = s.handOver(ctx, cli, owner, f.Session, cmd)
	}
	switch {
	case handed:
	case queueable(cmd.Kind):
		s.notify(owner, f.Session, cmd.ID, protocol.StatusQueued, "", "")
		s.fanSend(ctx, fanMsg{Kind: "c", Session: f.Session, Owner: owner}) // its CLI may be on another relay
	case s.heldElsewhere(ctx, f.Session):
		// Another relay holds the session's CLI: it hands the command
		// over (it stays queued until then).
		s.fanSend(ctx, fanMsg{Kind: "c", Session: f.Session, Owner: owner})
	default:
		s.commandStatus(ctx, owner, f.Session, cmd.ID, protocol.StatusRejected, "no CLI is connected for this session")
	}
	return nil
}

// CodeNotSealed is the error code of a plaintext command to a session
// that is end-to-end encrypted (refused, never stored).
const CodeNotSealed = "not-sealed"

// queueable reports whether a command of kind k waits on the relay while
// no CLI is connected for its session: prompts, and a daemon's start and
// stop (the machine is back after a moment: a relay or network restart);
// the rest answers what is shown now, and is rejected.
func queueable(k string) bool {
	return k == protocol.CommandPrompt || k == protocol.CommandStart || k == protocol.CommandStop
}

// sweepCommands rejects the commands that no CLI answered within
// QueuedPromptTTL (telling their apps) and deletes the commands that
// reached done or rejected more than CommandRetention ago. Called with
// cmdMu held, whenever commands are taken or handed out.
func (s *Server) sweepCommands(ctx context.Context) {
	now := s.store.clock()
	expired, err := s.store.ExpirePending(ctx, now.Add(-QueuedPromptTTL), fmt.Sprintf("no CLI carried this command out within %v", QueuedPromptTTL))
	if err != nil {
		s.storeFailed("expire pending commands", "", err)
	}
	for _, c := range expired {
		s.notify(c.Owner, c.Session, c.ID, c.Status, c.Message, "")
		s.fanSend(ctx, fanMsg{Kind: "x", Session: c.Session, Owner: c.Owner, ID: c.ID})
	}
	if _, err := s.store.PruneCommands(ctx, now.Add(-CommandRetention)); err != nil {
		s.storeFailed("prune commands", "", err)
	}
}

// commandStatus moves a command forward to status (AdvanceCommand) and,
// if it moved, tells the apps that follow its session. It returns where
// the command stands.
func (s *Server) commandStatus(ctx context.Context, owner, session, id, status, message string) (bool, StoredCommand, error) {
	return s.commandResult(ctx, owner, session, id, status, message, "")
}

// commandResult is commandStatus with the message a machine sealed (a
// CLI's result for a sealed session), kept and passed on beside message.
func (s *Server) commandResult(ctx context.Context, owner, session, id, status, message, sealed string) (bool, StoredCommand, error) {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	moved, c, err := s.store.AdvanceCommandSealed(ctx, owner, session, id, status, message, sealed)
	if err != nil {
		s.storeFailed("command status", session, err)
		return false, c, err
	}
	if status == protocol.StatusDone || status == protocol.StatusRejected || c.Status == protocol.StatusDone || c.Status == protocol.StatusRejected {
		s.peersMu.Lock()
		delete(s.delivered, cmdKey(owner, session, id))
		s.peersMu.Unlock()
	}
	if moved {
		crashpoint.Hit(crashpoint.RelayCommandMoved)
		s.commandEnded(status)
		s.notify(owner, session, id, status, message, sealed)
		s.fanSend(ctx, fanMsg{Kind: "x", Session: session, Owner: owner, ID: id})
	}
	return moved, c, nil
}

// notify tells every app connection that follows the session where a
// command stands (sealed: its message as the machine sealed it). It never
// blocks (peer queues).
func (s *Server) notify(owner, session, id, status, message, sealed string) {
	s.peersMu.Lock()
	var apps []*peer
	for p := range s.followers[owner+"/"+session] {
		apps = append(apps, p)
	}
	s.peersMu.Unlock()
	for _, app := range apps {
		app.send(protocol.Frame{Type: protocol.FrameStatus, Session: session, Command: &protocol.Command{ID: id}, Status: status, Message: message, SealedMessage: sealed})
	}
}

// claim makes the request's token the owner of session, or fails if the
// session belongs to another token. Call it only for a validated frame: a
// claim creates the session.
func (s *Server) claim(ctx context.Context, session string) error {
	if gone, err := s.store.Deleted(ctx, session); err != nil {
		return err
	} else if gone {
		return ErrDeleted
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
