package relay

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/ccrelay/ccrelay/protocol"
)

// CodeDeleted is the error code a CLI gets for envelopes or an announce of
// a deleted session: it drops what it holds for it and never sends it again.
const CodeDeleted = "deleted"

// claimRefused is the error frame for a failed claim of f's session.
func claimRefused(f protocol.Frame, err error) protocol.Frame {
	code := "forbidden"
	if errors.Is(err, ErrDeleted) {
		code = CodeDeleted
	}
	return protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Session: f.Session, Code: code, Message: err.Error()}
}

// sessionsAnswer is what GET /sessions says.
type sessionsAnswer struct {
	Sessions []protocol.SessionSummary `json:"sessions"`
}

// serveSessions answers GET /sessions (behind auth): the token's sessions,
// as lists show them.
func (s *Server) serveSessions(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	list, err := s.store.SessionsOf(r.Context(), ownerFrom(r.Context()))
	if err != nil {
		s.storeFailed("list", "", err)
		http.Error(w, "the relay's store failed; see the relay's log", http.StatusInternalServerError)
		return
	}
	a := sessionsAnswer{Sessions: make([]protocol.SessionSummary, 0, len(list))}
	for _, si := range list {
		a.Sessions = append(a.Sessions, summary(si))
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(a)
}

// serveDelete answers DELETE /sessions/{id} (behind auth): the session's
// envelopes and commands are removed and a tombstone kept. A live session
// may be deleted: its apps are told at once (a session frame with deleted
// set), and its CLI's next envelopes or announce are answered with the
// deleted code, after which it stops relaying the session. 204 when
// deleted, 404 for a session that is not the token's (or does not exist).
func (s *Server) serveDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := checkSession(id); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := s.DeleteSession(r.Context(), ownerFrom(r.Context()), id); err != nil {
		if errors.Is(err, ErrForbidden) || errors.Is(err, sql.ErrNoRows) {
			http.Error(w, "no session "+id+" for this token", http.StatusNotFound)
			return
		}
		s.storeFailed("delete", id, err)
		http.Error(w, "the relay's store failed; see the relay's log", http.StatusInternalServerError)
		return
	}
	s.log.Info("session deleted", "session", id)
	w.WriteHeader(http.StatusNoContent)
}

// DeleteSession deletes a session of owner and tells the owner's apps.
// It runs on the store's one writer connection, which the group committer
// holds until the appends it committed are published: an append before it
// reaches the apps before the deletion does, and one after it is refused
// (the tombstone is checked in the append's transaction).
func (s *Server) DeleteSession(ctx context.Context, owner, session string) error {
	err := s.store.DeleteSession(ctx, owner, session)
	if err != nil {
		return err
	}
	s.hub.sessionDeleted(owner, session)
	s.fanSend(ctx, fanMsg{Kind: "s", Session: session, Owner: owner})
	return nil
}

// sessionDeleted tells the owner's listers that a session is gone.
func (h *hub) sessionDeleted(owner, session string) {
	h.sessionChangedSummary(owner, protocol.SessionSummary{ID: session, Info: json.RawMessage("{}"), Deleted: true})
}
