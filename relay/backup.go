package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
)

// BackupReport is what a backup holds, as checked on the copy.
type BackupReport struct {
	Integrity  string // PRAGMA integrity_check: "ok"
	Sessions   int64
	Envelopes  int64
	Commands   int64
	Tombstones int64
	Bytes      int64 // the copy's size
}

// Backup writes a consistent copy of the database at dbPath to out (which
// must not exist) while a relay may be writing to it: VACUUM INTO through
// a read-only connection, a snapshot of one read transaction, compact
// (without free pages). It then opens the copy and checks it
// (integrity_check, counts). Restoring is serving the copy: put it in a
// data folder as relay.db.
func Backup(ctx context.Context, dbPath, out string) (BackupReport, error) {
	var rep BackupReport
	if _, err := os.Stat(dbPath); err != nil {
		return rep, fmt.Errorf("backup: %w", err)
	}
	if _, err := os.Stat(out); err == nil {
		return rep, fmt.Errorf("backup: %s exists; give a new file", out)
	} else if !errors.Is(err, os.ErrNotExist) {
		return rep, fmt.Errorf("backup: %w", err)
	}
	// The copy holds everything the relay holds: private from the start.
	if f, err := os.OpenFile(out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err != nil {
		return rep, fmt.Errorf("backup: %w", err)
	} else {
		f.Close()
	}
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		os.Remove(out)
		return rep, fmt.Errorf("backup %s: %w", dbPath, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, out); err != nil {
		os.Remove(out)
		return rep, fmt.Errorf("backup %s into %s: %w", dbPath, out, err)
	}
	return CheckCopy(ctx, out)
}

// CheckCopy checks a database file (integrity_check) and counts what it
// holds, without changing it.
func CheckCopy(ctx context.Context, path string) (BackupReport, error) {
	var rep BackupReport
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return rep, fmt.Errorf("check %s: %w", path, err)
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check(1)`).Scan(&rep.Integrity); err != nil {
		return rep, fmt.Errorf("check %s: %w", path, err)
	}
	for _, c := range []struct {
		table string
		n     *int64
	}{{"sessions", &rep.Sessions}, {"envelopes", &rep.Envelopes}, {"commands", &rep.Commands}, {"tombstones", &rep.Tombstones}} {
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+c.table).Scan(c.n); err != nil {
			return rep, fmt.Errorf("check %s: count %s: %w", path, c.table, err)
		}
	}
	if fi, err := os.Stat(path); err == nil {
		rep.Bytes = fi.Size()
	}
	if rep.Integrity != "ok" {
		return rep, fmt.Errorf("check %s: integrity_check says %q", path, rep.Integrity)
	}
	return rep, nil
}
