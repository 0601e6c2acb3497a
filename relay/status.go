package relay

import (
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
)

// statusAnswer is what GET /status says.
type statusAnswer struct {
	OK      bool   `json:"ok"`
	Session string `json:"session,omitempty"`
	// CLI: whether a CLI (Claude's machine) is connected for Session now.
	CLI   *bool  `json:"cli,omitempty"`
	Error string `json:"error,omitempty"`
}

// serveStatus answers GET /status (behind auth): a small check an app makes
// to tell "relay unreachable" (no answer), "credential refused" (401 from
// auth) and "relay reachable" (200) apart, which a failed websocket cannot
// (a browser sees the same close for all three). With ?session=<id> it
// also says whether that session's CLI is connected.
func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	session := r.URL.Query().Get("session")
	if session == "" {
		writeStatus(w, http.StatusOK, statusAnswer{OK: true})
		return
	}
	if err := checkSession(session); err != nil {
		writeStatus(w, http.StatusBadRequest, statusAnswer{Error: err.Error()})
		return
	}
	if err := s.mine(r.Context(), session); err != nil {
		if errors.Is(err, ErrForbidden) || errors.Is(err, sql.ErrNoRows) {
			writeStatus(w, http.StatusNotFound, statusAnswer{Error: "no session " + session + " for this token"})
			return
		}
		s.storeFailed("status", session, err)
		writeStatus(w, http.StatusInternalServerError, statusAnswer{Error: "the relay's store failed; see the relay's log"})
		return
	}
	s.peersMu.Lock()
	_, on := s.owners[session]
	s.peersMu.Unlock()
	writeStatus(w, http.StatusOK, statusAnswer{OK: true, Session: session, CLI: &on})
}

func writeStatus(w http.ResponseWriter, code int, a statusAnswer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(a)
}
