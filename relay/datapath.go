package relay

import (
	"errors"
	"sync/atomic"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dataPath holds the server's counters of what happened to the data.
type dataPath struct {
	conflicts   atomic.Int64 // envelope ids stored before with other content
	storeErrors atomic.Int64 // store operations that failed
	retained    atomic.Int64 // sessions deleted by retention
}

// Stats are counters a relay exposes (for logs, tests and monitoring).
type Stats struct {
	// Conflicts counts envelopes whose id was stored before with other
	// content (the first content stays; each is logged at Warn).
	Conflicts int64
	// StoreErrors counts store operations that failed (each logged at
	// Error).
	StoreErrors int64
}

// Stats returns the relay's counters.
func (s *Server) Stats() Stats {
	return Stats{Conflicts: s.dp.conflicts.Load(), StoreErrors: s.dp.storeErrors.Load()}
}

// storeFailed logs a store error at Error, with the session it concerns
// (a full disk says so: only the relay's operator can free space).
func (s *Server) storeFailed(op, session string, err error) {
	s.dp.storeErrors.Add(1)
	msg := "store error"
	if isDiskFull(err) {
		msg = "store error: disk full"
	}
	s.log.Error(msg, "op", op, "session", session, "err", err)
}

func isDiskFull(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL
}
