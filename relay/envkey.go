package relay

import (
	"context"
	"crypto/md5"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"strings"

	"modernc.org/sqlite"
)

// From version 11 an envelope is found by an integer, h (envelopeHash):
// its session's number in the high 32 bits, as in the row's key, and a
// hash of its id in the low 32, in an index of its own (envelopes_by_hash),
// where version 6 kept a unique index of the session number and the id's
// text (about 42 bytes an envelope in SQLite, the id's text repeated; h
// and the row's key take about 22). A session's envelopes stay together in
// the index, as they were, so a batch writes the index pages of its own
// session only (a hash over the whole table spread each batch over the
// whole index: four times the pages written at each commit). The index is
// not unique: two ids of a session may share a hash, and a lookup compares
// the ids of the rows it finds, so a resend of an id in its session is a
// duplicate, the same id in another session is not, and two ids that share
// a hash are both stored. Appends of one session take turns (the
// session's row is held: rowLock; SQLite has one writer), so a lookup
// before the insert sees every earlier append's rows.
//
// h is computed the same way by ccrelay (envelopeHash: SQLite's appends),
// by SQLite during the migration (the function ccrelay_envelope_hash,
// registered below) and by PostgreSQL (pgEnvelopeHash: its migration and
// ccrelay_append).

// envelopeHash is h of envelope id in the session numbered no: no times
// 2^32 plus the first 4 bytes of the MD5 of the id, big-endian.
func envelopeHash(no int64, id string) int64 {
	sum := md5.Sum([]byte(id))
	return no<<seqBits | int64(binary.BigEndian.Uint32(sum[:4]))
}

// pgEnvelopeHash is envelopeHash in PostgreSQL, of the columns sn and id
// (ccrelay_append: of v_no and an id of the batch).
const pgEnvelopeHash = `(sn << 32) | ('x' || left(md5(id), 8))::bit(32)::bigint`

func init() {
	// ccrelay_envelope_hash(no, id) is envelopeHash in SQLite (version 11).
	if err := sqlite.RegisterDeterministicScalarFunction("ccrelay_envelope_hash", 2, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		no, ok := args[0].(int64)
		if !ok {
			return nil, fmt.Errorf("ccrelay_envelope_hash: session number %T", args[0])
		}
		switch id := args[1].(type) {
		case string:
			return envelopeHash(no, id), nil
		case []byte:
			return envelopeHash(no, string(id)), nil
		default:
			return nil, fmt.Errorf("ccrelay_envelope_hash: id %T", args[1])
		}
	}); err != nil {
		panic(err) // only if registered twice: a programming error
	}
}

// envelopesByHash is version 11: the envelopes copied, in key order, to a
// table with h and without the session number (the key holds it) or the
// unique (session number, id) index, then the index of h made over the
// copy. HASH is the engine's hash of the columns sn and id.
const envelopesByHash = `CREATE TABLE envelopes_10 (
	k    INTEGER PRIMARY KEY,
	h    INTEGER NOT NULL,
	id   TEXT NOT NULL,
	body BLOB NOT NULL
);
INSERT INTO envelopes_10 (k, h, id, body) SELECT k, HASH, id, body FROM envelopes ORDER BY k;
DROP TABLE envelopes;
ALTER TABLE envelopes_10 RENAME TO envelopes;
CREATE INDEX envelopes_by_hash ON envelopes (h)`

// envelopesByHashSQLite runs version 11 in one transaction: a relay
// stopped during it (killed, or the machine down) finds the database as
// version 10 left it and runs it again. A database that has it already
// (the version not recorded: stopped in between) is left.
func envelopesByHashSQLite(ctx context.Context, w *sqlDB) error {
	return envelopesByHashSQLiteThen(ctx, w, nil)
}

// envelopesByHashSQLiteThen is envelopesByHashSQLite; then, when not nil,
// runs before the commit (tests stop there).
func envelopesByHashSQLiteThen(ctx context.Context, w *sqlDB, then func(sqlTx) error) error {
	var done int
	if err := w.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('envelopes') WHERE name = 'h'`).Scan(&done); err != nil || done > 0 {
		return err
	}
	t, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer t.Rollback()
	if _, err := t.ExecContext(ctx, strings.Replace(envelopesByHash, "HASH", "ccrelay_envelope_hash(sn, id)", 1)); err != nil {
		return fmt.Errorf("copy the envelopes: %w", err)
	}
	if then != nil {
		if err := then(t); err != nil {
			return err
		}
	}
	return t.Commit()
}

// envelopesByHashPG is version 11 on PostgreSQL, in the migration's
// transaction: the same copy, and ccrelay_append that uses h.
func envelopesByHashPG(ctx context.Context, t sqlTx) error {
	if err := pgExec(pgDDL(strings.Replace(envelopesByHash, "HASH", pgEnvelopeHash, 1)))(ctx, t); err != nil {
		return err
	}
	for _, q := range []string{
		`DROP FUNCTION IF EXISTS ccrelay_append(TEXT, BIGINT, TEXT[], BYTEA[], BYTEA[], TEXT[], TEXT, TEXT)`,
		appendFunction,
	} {
		if _, err := t.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", firstLine(q), err)
		}
	}
	return nil
}
