package relay

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx"
)

// A migration moves the schema one version forward, in either engine.
type migration struct {
	version int
	name    string
	sqlite  func(ctx context.Context, w *sqlDB) error
	pg      func(ctx context.Context, t sqlTx) error
}

// migrations, in order. A database records the versions it went through
// (schema_version); each start applies those it lacks, and a database a
// newer ccrelay migrated further is refused (an older binary would not
// know its tables). Add a version; never change one that shipped. A
// SQLite step is not recorded in its own transaction: it must find
// itself done when it runs again (a relay killed before the record).
var migrations = []migration{
	{1, "sessions, envelopes, blobs, commands, tombstones, accounts, credentials, session keys", sqliteBaseline, pgBaseline},
	{2, "cli_presence: which relay holds a session's CLI", sqliteExec(presenceTable), pgExec(presenceTable)},
	{3, "pairing codes and wrong guesses, shared by the relays", sqliteExec(pairingTables), pgExec(pgDDL(pairingTables))},
	{4, "session infos stored as their summaries", summarizeStoredSQLite, summarizeStoredPG},
	{5, "sessions listed by owner through an index", sqliteExec(sessionsByOwner), pgExec(sessionsByOwner)},
	{6, "envelopes keyed by session number and sequence, bodies encoded (codec.go)", envelopesByKeySQLite, pgExec(pgDDL(envelopesByKeyPG))},
	{7, "push subscriptions, the VAPID key and visibility, shared by the relays", sqliteExec(pushTables), pgExec(pgDDL(pushTables))},
	{8, "machines found through an index (a list's first page holds them)", sqliteExec(sessionsMachines), pgExec(sessionsMachines)},
	{9, "an append in one statement on PostgreSQL (ccrelay_append, appendpg.go)", func(context.Context, *sqlDB) error { return nil }, pgAppendFunction},
	{10, "cli_held: the sessions a CLI holds, which the next start marks if it does not come back", sqliteExec(heldTable), pgExec(pgDDL(heldTable))},
	{11, "envelopes found by a hash of their session number and id (envkey.go)", envelopesByHashSQLite, envelopesByHashPG},
	{12, "a command result's message as the machine sealed it", sqliteAddColumn("commands", "sealed_message", commandsSealedMessage), pgExec(commandsSealedMessage)},
}

// commandsSealedMessage keeps a command result's message sealed by the
// machine (a sealed session's), beside the readable message.
const commandsSealedMessage = `ALTER TABLE commands ADD COLUMN sealed_message TEXT NOT NULL DEFAULT ''`

// Envelopes from version 6: a session has a number (sessions.no), and an envelope's key k is that number times 2^32
// plus its sequence number, so that a session's envelopes are one range of
// the table's integer key (a rowid table in SQLite: a row up to a page's
// size stays in its b-tree page, where WITHOUT ROWID spilled every row
// beyond a quarter page to a page of its own). The session's id is no
// longer repeated in each row and in the id index.
const (
	seqBits = 32
	// maxSeq is the last sequence number of a session; maxSessionNo the
	// last session number (k stays a positive int64).
	maxSeq       = 1<<seqBits - 1
	maxSessionNo = 1<<(63-seqBits) - 1
)

// envelopeKey is the key of envelope seq of the session numbered no.
func envelopeKey(no, seq int64) int64 { return no<<seqBits | seq }

const envelopesByKey = `CREATE TABLE envelopes_6 (
	k    INTEGER PRIMARY KEY,
	sn   INTEGER NOT NULL,
	id   TEXT NOT NULL,
	body BLOB NOT NULL,
	UNIQUE (sn, id)
);
INSERT INTO envelopes_6 (k, sn, id, body)
	SELECT s.no * 4294967296 + e.seq, s.no, e.id, e.body FROM envelopes e JOIN sessions s ON s.id = e.session;
DROP TABLE envelopes;
ALTER TABLE envelopes_6 RENAME TO envelopes`

// A new session's number, in SQLite: the next after the highest. A number
// is unique among the sessions that exist; one freed by a deletion, which
// removes the session's envelopes with it, may be given again and starts
// empty. (PostgreSQL: a sequence.)
const sessionNoTrigger = `CREATE TRIGGER sessions_no AFTER INSERT ON sessions WHEN NEW.no IS NULL BEGIN
	UPDATE sessions SET no = (SELECT COALESCE(MAX(no), 0) + 1 FROM sessions) WHERE id = NEW.id;
END`

const envelopesByKeyPG = `ALTER TABLE sessions ADD COLUMN no BIGSERIAL;
CREATE UNIQUE INDEX sessions_by_no ON sessions (no);
` + envelopesByKey

// envelopesByKeySQLite runs version 6 in one transaction; a database that
// has it already (the version not recorded: stopped in between) is left.
func envelopesByKeySQLite(ctx context.Context, w *sqlDB) error {
	var done int
	if err := w.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('envelopes') WHERE name = 'k'`).Scan(&done); err != nil || done > 0 {
		return err
	}
	t, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer t.Rollback()
	for _, q := range []string{
		`ALTER TABLE sessions ADD COLUMN no INTEGER`,
		`UPDATE sessions SET no = rowid`,
		`CREATE UNIQUE INDEX sessions_by_no ON sessions (no)`,
		sessionNoTrigger,
		envelopesByKey,
	} {
		if _, err := t.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", firstLine(q), err)
		}
	}
	return t.Commit()
}

// sessionsMachines indexes the sessions that are machines (a daemon's
// summary); the query must carry the same literal WHERE (machinesWhere)
// for either engine to use it.
const sessionsMachines = `CREATE INDEX IF NOT EXISTS sessions_machines ON sessions (owner, updated_ms DESC, id) WHERE ` + machinesWhere

const machinesWhere = `info LIKE '%"mode":"machine"%'`

const sessionsByOwner = `CREATE INDEX IF NOT EXISTS sessions_by_owner ON sessions (owner, updated_ms DESC, id)`

// summarizeStored replaces each session's stored info by its summary
// (SummarizeInfo is idempotent): lists then send what is stored as is.
// Versions before the announcement was summarized on arrival kept the
// whole info.
func summarizeStored(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}) error {
	rows, err := q.QueryContext(ctx, `SELECT id, info FROM sessions`)
	if err != nil {
		return err
	}
	changed := map[string]string{}
	for rows.Next() {
		var id, info string
		if err := rows.Scan(&id, &info); err != nil {
			rows.Close()
			return err
		}
		if sum := string(summaryInfo(json.RawMessage(info))); sum != info {
			changed[id] = sum
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for id, sum := range changed {
		if _, err := q.ExecContext(ctx, `UPDATE sessions SET info = ? WHERE id = ?`, sum, id); err != nil {
			return err
		}
	}
	return nil
}

func summarizeStoredSQLite(ctx context.Context, w *sqlDB) error {
	t, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer t.Rollback()
	if err := summarizeStored(ctx, t); err != nil {
		return err
	}
	return t.Commit()
}

func summarizeStoredPG(ctx context.Context, t sqlTx) error { return summarizeStored(ctx, t) }

// pairingTables: pairing codes outstanding (by SHA-256), and the wrong
// codes tried within PairCodeTTL (pairing.go). They were in one relay's
// memory; in the store, a code asked for through one relay is redeemed
// through another.
const pairingTables = `CREATE TABLE IF NOT EXISTS pairing_codes (
	key         BLOB PRIMARY KEY,
	account     TEXT NOT NULL,
	role        TEXT NOT NULL,
	machine_key BLOB,
	by_cred     TEXT NOT NULL,
	expires_ms  INTEGER NOT NULL,
	spent       INTEGER NOT NULL DEFAULT 0,
	result      TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS pair_guesses (at_ms INTEGER NOT NULL)`

// presenceTable: the relay (node) that holds each session's CLI, and when
// it last said so (fanout.go). Used by relays sharing PostgreSQL.
const presenceTable = `CREATE TABLE IF NOT EXISTS cli_presence (
	session TEXT PRIMARY KEY,
	node    TEXT NOT NULL,
	seen_ms BIGINT NOT NULL
)`

// heldTable: the sessions a CLI connection took and that no mark
// (gone.go) has settled since, with whether the CLI that held one last
// closed its connection itself (stopped). A relay that stops leaves them;
// the next one marks those that no CLI holds again, and only those of its
// idle sessions.
const heldTable = `CREATE TABLE IF NOT EXISTS cli_held (
	session  TEXT PRIMARY KEY,
	owner    TEXT NOT NULL,
	since_ms INTEGER NOT NULL,
	stopped  INTEGER NOT NULL DEFAULT 0
)`

// sqliteAddColumn runs q, which adds column to table, unless table has
// it: a relay killed after the column was added and before its version
// was recorded runs the step again at its next start, where a second ADD
// COLUMN fails.
func sqliteAddColumn(table, column, q string) func(context.Context, *sqlDB) error {
	return func(ctx context.Context, w *sqlDB) error {
		var has int
		if err := w.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`, table, column).Scan(&has); err != nil {
			return fmt.Errorf("columns of %s: %w", table, err)
		}
		if has > 0 {
			return nil
		}
		_, err := w.ExecContext(ctx, q)
		return err
	}
}

func sqliteExec(q string) func(context.Context, *sqlDB) error {
	return func(ctx context.Context, w *sqlDB) error { _, err := w.ExecContext(ctx, q); return err }
}

func pgExec(q string) func(context.Context, sqlTx) error {
	return func(ctx context.Context, t sqlTx) error {
		for _, stmt := range strings.Split(q, ";") {
			if strings.TrimSpace(stmt) == "" {
				continue
			}
			if _, err := t.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("%s: %w", firstLine(stmt), err)
			}
		}
		return nil
	}
}

// pgDDL is SQLite DDL as PostgreSQL takes it: BYTEA for BLOB, BIGINT for
// INTEGER, no WITHOUT ROWID.
func pgDDL(ddl string) string {
	return strings.NewReplacer("BLOB", "BYTEA", "INTEGER", "BIGINT", ") WITHOUT ROWID;", ");").Replace(ddl)
}

// SchemaVersion is the schema this ccrelay makes and reads.
func SchemaVersion() int { return migrations[len(migrations)-1].version }

const versionTable = `CREATE TABLE IF NOT EXISTS schema_version (
	version    INTEGER PRIMARY KEY,
	name       TEXT NOT NULL,
	applied_ms BIGINT NOT NULL
)`

// pgMigrateLock is the advisory lock nodes starting together take, so
// that one migrates and the others find it done.
const pgMigrateLock = 0x63637261 // "ccra"

// migrate brings the database at w to SchemaVersion.
func migrate(ctx context.Context, w *sqlDB) error { return migrateWith(ctx, w, migrations) }

// migrateWith applies the versions of list the database lacks (tests stop
// at an older version).
func migrateWith(ctx context.Context, w *sqlDB, list []migration) error {
	if w.d == postgresSQL {
		conn, err := w.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, pgMigrateLock); err != nil {
			return fmt.Errorf("take the migration lock: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, pgMigrateLock)
	}
	if _, err := w.ExecContext(ctx, versionTable); err != nil {
		return err
	}
	var current int
	if err := w.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&current); err != nil {
		return err
	}
	if current > SchemaVersion() {
		return fmt.Errorf("the database is at schema version %d, made by a newer ccrelay (this one knows up to %d): run that version, or restore a backup", current, SchemaVersion())
	}
	for _, m := range list {
		if m.version <= current {
			continue
		}
		if err := applyMigration(ctx, w, m); err != nil {
			return fmt.Errorf("schema version %d (%s): %w", m.version, m.name, err)
		}
	}
	return nil
}

func applyMigration(ctx context.Context, w *sqlDB, m migration) error {
	record := `INSERT INTO schema_version (version, name, applied_ms) VALUES (?, ?, ?)`
	now := time.Now().UnixMilli()
	if w.d == sqliteSQL {
		// SQLite's baseline runs the steps older versions took one by one,
		// each safe to run again.
		if err := m.sqlite(ctx, w); err != nil {
			return err
		}
		_, err := w.ExecContext(ctx, record, m.version, m.name, now)
		return err
	}
	t, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer t.Rollback()
	if err := m.pg(ctx, t); err != nil {
		return err
	}
	if _, err := t.ExecContext(ctx, record, m.version, m.name, now); err != nil {
		return err
	}
	return t.Commit()
}

// sqliteBaseline makes the tables (and brings databases of older
// versions, from before schema_version, to them).
func sqliteBaseline(ctx context.Context, w *sqlDB) error {
	if _, err := w.ExecContext(ctx, schema+accountsSchema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	for _, col := range []string{"owner", "prompt"} {
		var has int
		w.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('sessions') WHERE name = ?`, col).Scan(&has)
		if has == 0 {
			if _, err := w.ExecContext(ctx, `ALTER TABLE sessions ADD COLUMN `+col+` TEXT NOT NULL DEFAULT ''`); err != nil {
				return err
			}
		}
	}
	return migrateCommands(w.DB, "the database")
}

// pgBaseline makes the same tables in PostgreSQL: BYTEA for BLOB, BIGINT
// for INTEGER (times in ms, sequence numbers), and a serial column that
// orders commands made in the same millisecond (SQLite's rowid).
func pgBaseline(ctx context.Context, t sqlTx) error {
	if err := pgExec(pgDDL(schema+accountsSchema))(ctx, t); err != nil {
		return err
	}
	for _, q := range []string{
		`ALTER TABLE commands ADD COLUMN IF NOT EXISTS n BIGSERIAL`,
		`CREATE INDEX IF NOT EXISTS commands_by_session ON commands (owner, session, status, created_ms)`,
		`CREATE INDEX IF NOT EXISTS commands_by_status ON commands (status, updated_ms)`,
	} {
		if _, err := t.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// commandOrder is the column that orders commands made in the same
// millisecond.
func (d dialect) commandOrder() string {
	if d == postgresSQL {
		return "n"
	}
	return "rowid"
}

// OpenPostgres opens (migrating if needed) the relay's store in the
// PostgreSQL database at url (postgres://user@host/db?…). Several relays
// may share it.
func OpenPostgres(ctx context.Context, url string) (*Store, error) {
	pool, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	pool.SetMaxOpenConns(16)
	pool.SetMaxIdleConns(16)
	pool.SetConnMaxIdleTime(5 * time.Minute)
	if err := pool.PingContext(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	w := &sqlDB{pool, postgresSQL}
	if err := migrate(ctx, w); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrate postgres: %w", err)
	}
	return &Store{w: w, r: w, url: url}, nil
}
