package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ccrelay/ccrelay/internal/crashpoint"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/coder/websocket"
)

// maxClaimedPerConn bounds the sessions a CLI connection remembers it
// claimed (beyond, it forgets the oldest, and claims them again if they
// come back).
const maxClaimedPerConn = 1024

func (s *Server) serveCLI(w http.ResponseWriter, r *http.Request) {
	c, done, err := s.upgrade(w, r, websocket.CompressionDisabled)
	if err != nil {
		return
	}
	defer done()
	// A frame over MaxFrameBytes is answered (readFrames), not a reason
	// to close: a CLI that sent one hears why and goes on.
	c.SetReadLimit(MaxDiscardFrameBytes)
	defer s.connOpened("cli", r)(&err)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	me := newPeer(c, ownerFrom(ctx))
	defer s.addCLI(ctx, me)()
	me.start(ctx)
	defer me.stop() // runs after ctx is cancelled
	defer cancel()
	// A CLI that closes its connection itself (ccrelay stopping) is told
	// apart from one whose connection was lost (its machine off or offline).
	defer func() {
		s.cliGone(me.owner, s.disown(context.WithoutCancel(ctx), me), websocket.CloseStatus(err) == websocket.StatusNormalClosure)
	}()
	// Sessions this connection claimed: a session's owner never changes,
	// so its next batches skip the claim (a deletion since is still found:
	// the append checks the tombstone in its own transaction).
	var claimed fifoSet[struct{}]
	err = s.readFrames(ctx, c, func(f protocol.Frame, ids []string) error {
		switch f.Type {
		case protocol.FrameKeys:
			return s.storeKeys(ctx, c, me, f)
		case protocol.FrameDevices:
			// A CLI asks for its account's keyed devices (at connect).
			devs, err := s.keyedDevices(ctx, me.owner)
			if err != nil {
				e := errorFrame("store", "the relay's store failed")
				e.Ref = f.Ref
				return writeFrame(ctx, c, e)
			}
			return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameDevices, Ref: f.Ref, Devices: devs})
		case protocol.FrameEnvelopes:
			items, ferr := checkBatch(f, ids)
			if ferr != nil {
				ferr.Ref = f.Ref
				return writeFrame(ctx, c, *ferr)
			}
			if _, ok := claimed.get(f.Session); !ok {
				if err := s.claim(ctx, f.Session); err != nil {
					return writeFrame(ctx, c, claimRefused(f, err))
				}
				claimed.put(f.Session, struct{}{}, maxClaimedPerConn)
			}
			// The owner is known before any app sees what this frame
			// brings: a command sent on seeing it finds the CLI.
			fresh := s.setOwner(ctx, f.Session, me)
			reply, ferr := s.storeBatch(ctx, f.Session, items)
			if ferr != nil {
				claimed.forget(f.Session)
				reply = *ferr
			} else {
				crashpoint.Hit(crashpoint.RelayCommitted)
			}
			reply.Ref = f.Ref
			return s.replyThenHandOver(ctx, c, reply, fresh, f.Session, me)
		case protocol.FrameLive:
			if err := checkSession(f.Session); err != nil {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "bad-live", Message: err.Error()})
			}
			if len(f.Payload) > protocol.MaxLiveBytes {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "bad-live", Message: fmt.Sprintf("live payload is %d bytes, more than %d", len(f.Payload), protocol.MaxLiveBytes)})
			}
			if len(f.Payload) == 0 || f.Payload[0] != '{' {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "bad-live", Message: "a live frame needs a session and an object payload"})
			}
			if s.mine(ctx, f.Session) != nil {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "forbidden", Message: "not a session of this token"})
			}
			frame, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameLive, Session: f.Session, Payload: f.Payload})
			s.hub.publish(f.Session, published{frame: frame, live: true})
			s.fanSend(ctx, fanMsg{Kind: "l", Session: f.Session, Live: f.Payload})
			return nil
		case protocol.FrameResult:
			if err := checkResult(f); err != nil {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "bad-result", Message: err.Error()})
			}
			if s.mine(ctx, f.Session) != nil {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "forbidden", Message: "not a session of this token"})
			}
			if s.answer(ctx, me, f) != nil {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "not-delivered", Message: fmt.Sprintf("command %s of session %s was not delivered to this connection, or is answered already", f.Command.ID, f.Session)})
			}
			return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameAck, Ref: f.Ref, Session: f.Session})
		case protocol.FrameAnnounce:
			if err := checkSession(f.Session); err != nil {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "bad-announce", Message: err.Error()})
			}
			if err := checkInfo(f.Info); err != nil {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "bad-announce", Message: err.Error()})
			}
			if err := s.claim(ctx, f.Session); err != nil {
				return writeFrame(ctx, c, claimRefused(f, err))
			}
			// The owner is known before the apps hear of the session: a
			// command sent on seeing it finds the CLI.
			fresh := s.setOwner(ctx, f.Session, me)
			// Only the summary is kept: it is all that lists send, it costs
			// nothing to list, and the relay holds no more than it needs.
			si, err := s.store.Announce(ctx, f.Session, summaryInfo(f.Info))
			if errors.Is(err, ErrDeleted) {
				// Deleted since the claim.
				return s.replyThenHandOver(ctx, c, claimRefused(f, err), fresh, f.Session, me)
			}
			if err != nil {
				// The frame was valid: the store failed (the CLI retries).
				s.storeFailed("announce", f.Session, err)
				e := errorFrame("store", "%v", err)
				e.Ref = f.Ref
				return s.replyThenHandOver(ctx, c, e, fresh, f.Session, me)
			}
			s.hub.sessionChanged(si)
			s.fanSend(ctx, fanMsg{Kind: "s", Session: f.Session, Owner: si.Owner})
			s.told(f.Session)
			s.pushAnnounced(ctx, si, f.Info)
			return s.replyThenHandOver(ctx, c, protocol.Frame{Type: protocol.FrameAck, Ref: f.Ref, Session: f.Session}, fresh, f.Session, me)
		default:
			return writeFrame(ctx, c, errorFrame("bad-type", "unknown frame type %q on the CLI endpoint", f.Type))
		}
	})
	s.closeStatus(c, err)
}

// replyThenHandOver writes the reply to a CLI's frame that claimed session
// (its ack, or the error the store gave) and then, if the claim made the
// CLI the session's owner (fresh), hands it the commands queued for the
// session. It does so whatever the reply: the CLI stays the owner after a
// failed store, its retry finds it so and is not fresh, and until the
// queued commands are handed over they would wait for the next command an
// app sends.
func (s *Server) replyThenHandOver(ctx context.Context, c *websocket.Conn, reply protocol.Frame, fresh bool, session string, me *peer) error {
	if err := writeFrame(ctx, c, reply); err != nil {
		return err
	}
	if fresh {
		s.deliverQueued(ctx, session, me)
	}
	return nil
}

func (s *Server) closeStatus(c *websocket.Conn, err error) {
	var ce websocket.CloseError
	switch {
	case errors.As(err, &ce):
	case errors.Is(err, context.Canceled):
		c.Close(websocket.StatusGoingAway, "relay shutting down")
	default:
		s.log.Debug("connection ended", "err", err)
	}
}

// storeBatch stores a validated batch and publishes what is new to the
// apps. The store commits batches of every connection in groups and calls
// back in sequence order, so apps get envelopes in order; the ack goes out
// only once the batch is durable.
func (s *Server) storeBatch(ctx context.Context, session string, items []Item) (protocol.Frame, *protocol.Frame) {
	var fresh []Stored
	t0 := time.Now()
	// On PostgreSQL the other nodes are told in the append's own statement
	// (one round trip for the batch, its notice and the session's row).
	notice := s.fanNotice(fanMsg{Kind: "e", Session: session, Owner: ownerFrom(ctx)})
	res, si, err := s.store.appendNotice(ctx, session, items, notice, func(res []Appended) {
		for i, it := range items {
			if res[i].New {
				fresh = append(fresh, Stored{Seq: res[i].Seq, ID: it.ID, Body: it.Body})
			}
		}
		if len(fresh) > 0 {
			s.hub.publish(session, newPublished(session, fresh))
			s.told(session)
		}
	})
	s.observeStore("append", t0)
	if errors.Is(err, ErrDeleted) {
		// Deleted between the claim and the append.
		e := protocol.Frame{Type: protocol.FrameError, Session: session, Code: CodeDeleted, Message: ErrDeleted.Error()}
		return protocol.Frame{}, &e
	}
	if err != nil {
		s.storeFailed("append", session, err)
		e := errorFrame("store", "%v", err)
		return protocol.Frame{}, &e
	}
	ack := protocol.Frame{Type: protocol.FrameAck, Session: session, Acks: make([]protocol.Ack, len(items))}
	for i, it := range items {
		ack.Acks[i] = protocol.Ack{ID: it.ID, Seq: res[i].Seq}
		if res[i].Conflict {
			// Ids are derived from where an envelope came from: the same id
			// with other content is a mapper change or a bug. The first
			// stays; say so.
			s.dp.conflicts.Add(1)
			s.log.Warn("envelope id stored before with other content; the first is kept", "session", session, "id", it.ID, "seq", res[i].Seq)
		}
	}
	s.stored(fresh)
	if len(fresh) > 0 {
		if notice == nil {
			s.fanSend(ctx, fanMsg{Kind: "e", Session: session, Owner: ownerFrom(ctx)})
		}
		// The session as this append committed it (the store says, on
		// either engine: its row is not read again).
		s.hub.sessionChanged(*si)
		s.pushStored(ctx, session, fresh)
	}
	return ack, nil
}

// checkResult validates a command result from a CLI.
func checkResult(f protocol.Frame) error {
	if err := checkSession(f.Session); err != nil {
		return err
	}
	if f.Command == nil || !protocol.IsCuid(f.Command.ID) || (f.Status != protocol.StatusDone && f.Status != protocol.StatusRejected) {
		return errors.New("a result needs a command id (a cuid2) and status done or rejected")
	}
	if len(f.Message) > protocol.MaxResultMessageBytes {
		return fmt.Errorf("result message is %d bytes, more than %d", len(f.Message), protocol.MaxResultMessageBytes)
	}
	if f.SealedMessage != "" {
		// Sealed by the machine: the relay checks its form and size only.
		if min := (protocol.SealOverhead*8 + 5) / 6; len(f.SealedMessage) < min || len(f.SealedMessage) > protocol.MaxSealedResultChars {
			return fmt.Errorf("result sealedMessage is %d characters, not a sealed message (%d to %d)", len(f.SealedMessage), min, protocol.MaxSealedResultChars)
		}
		if _, ok := sealedBytes([]byte(f.SealedMessage)); !ok {
			return errors.New("result sealedMessage is not strict unpadded base64url (another alphabet, padding, or unused trailing bits set)")
		}
	}
	return nil
}
