package relay

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/coder/websocket"
)

func (s *Server) serveCLI(w http.ResponseWriter, r *http.Request) {
	c, done, err := s.upgrade(w, r, websocket.CompressionDisabled)
	if err != nil {
		return
	}
	defer done()
	ctx := r.Context()
	me := &peer{c: c}
	defer s.disown(me)
	err = s.readFrames(ctx, c, func(f protocol.Frame) error {
		switch f.Type {
		case protocol.FrameEnvelopes:
			if err := s.claim(ctx, f.Session); err != nil {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "forbidden", Message: err.Error()})
			}
			ack, ferr := s.storeBatch(ctx, f)
			if ferr != nil {
				ferr.Ref = f.Ref
				return writeFrame(ctx, c, *ferr)
			}
			ack.Ref = f.Ref
			fresh := s.setOwner(f.Session, me)
			if err := writeFrame(ctx, c, ack); err != nil {
				return err
			}
			if fresh {
				s.deliverQueued(ctx, f.Session, me)
			}
			return nil
		case protocol.FrameLive:
			if s.mine(ctx, f.Session) != nil {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "forbidden", Message: "not a session of this token"})
			}
			if f.Session == "" || len(f.Payload) == 0 || f.Payload[0] != '{' {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "bad-live", Message: "a live frame needs a session and an object payload"})
			}
			frame, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameLive, Session: f.Session, Payload: f.Payload})
			s.hub.publish(f.Session, published{frame: frame, live: true})
			return nil
		case protocol.FrameResult:
			if s.mine(ctx, f.Session) != nil {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "forbidden", Message: "not a session of this token"})
			}
			if f.Command == nil || f.Command.ID == "" || (f.Status != protocol.StatusDone && f.Status != protocol.StatusRejected) {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "bad-result", Message: "a result needs a command id and status done or rejected"})
			}
			s.commandStatus(ctx, f.Session, f.Command.ID, f.Status, f.Message)
			return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameAck, Ref: f.Ref, Session: f.Session})
		case protocol.FrameAnnounce:
			if f.Session == "" {
				return writeFrame(ctx, c, errorFrame("bad-announce", "announce needs a session"))
			}
			if err := s.claim(ctx, f.Session); err != nil {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "forbidden", Message: err.Error()})
			}
			si, err := s.store.Announce(ctx, f.Session, f.Info)
			if err != nil {
				e := errorFrame("bad-announce", "%v", err)
				e.Ref = f.Ref
				return writeFrame(ctx, c, e)
			}
			s.hub.sessionChanged(si)
			fresh := s.setOwner(f.Session, me)
			if err := writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameAck, Ref: f.Ref, Session: f.Session}); err != nil {
				return err
			}
			if fresh {
				s.deliverQueued(ctx, f.Session, me)
			}
			return nil
		default:
			return writeFrame(ctx, c, errorFrame("bad-type", "unknown frame type %q on the CLI endpoint", f.Type))
		}
	})
	s.closeStatus(c, err)
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

// storeBatch stores a batch and publishes what is new to the apps.
func (s *Server) storeBatch(ctx context.Context, f protocol.Frame) (protocol.Frame, *protocol.Frame) {
	if f.Session == "" || len(f.Envelopes) == 0 || len(f.Envelopes) > maxBatch {
		e := errorFrame("bad-batch", "a batch needs a session and 1 to %d envelopes", maxBatch)
		return protocol.Frame{}, &e
	}
	items := make([]Item, len(f.Envelopes))
	for i, raw := range f.Envelopes {
		var env protocol.Envelope
		if err := json.Unmarshal(raw, &env); err != nil {
			e := errorFrame("bad-envelope", "envelope %d: %v", i, err)
			return protocol.Frame{}, &e
		}
		if err := env.Validate(); err != nil {
			e := errorFrame("bad-envelope", "envelope %d: %v", i, err)
			return protocol.Frame{}, &e
		}
		items[i] = Item{ID: env.ID, Body: raw}
	}
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	last, err := s.store.LastSeq(ctx, f.Session)
	if err != nil {
		e := errorFrame("store", "%v", err)
		return protocol.Frame{}, &e
	}
	seqs, err := s.store.Append(ctx, f.Session, items)
	if err != nil {
		e := errorFrame("store", "%v", err)
		return protocol.Frame{}, &e
	}
	ack := protocol.Frame{Type: protocol.FrameAck, Session: f.Session, Acks: make([]protocol.Ack, len(items))}
	var fresh []Stored
	for i, it := range items {
		ack.Acks[i] = protocol.Ack{ID: it.ID, Seq: seqs[i]}
		if seqs[i] > last {
			fresh = append(fresh, Stored{Seq: seqs[i], ID: it.ID, Body: it.Body})
			last = seqs[i]
		}
	}
	if len(fresh) > 0 {
		s.hub.publish(f.Session, newPublished(f.Session, fresh))
		if si, err := s.store.session(ctx, f.Session); err == nil {
			s.hub.sessionChanged(si)
		}
	}
	return ack, nil
}
