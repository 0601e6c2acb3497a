// Package relay is the relay server: it stores sessions and their envelopes
// and streams them to apps. This file is its storage: SQLite (pure Go,
// modernc.org/sqlite) in WAL mode.
package relay

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// Store keeps sessions and their envelopes. Each stored envelope gets the
// next sequence number of its session; an envelope id is stored at most
// once per session (a resent envelope gets its existing number back).
type Store struct {
	w *sqlDB // SQLite: one connection (one writer); PostgreSQL: a pool
	r *sqlDB // readers (SQLite's WAL lets them run beside the writer)

	now func() time.Time // the clock (time.Now when nil); tests set it

	url string // PostgreSQL: the database's URL (the relays' LISTEN connection)

	group grouper // commits appends in groups (groupcommit.go)

	stmts sync.Map // query -> *sql.Stmt prepared on w (Store.stmt)

	reads atomic.Int64 // Read calls (tests: how often apps' reads reach the store)
	// sessionReads counts reads of a session's row by id (tests: the ack
	// path reads none).
	sessionReads atomic.Int64
}

func (s *Store) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// Stored is an envelope as stored.
type Stored struct {
	Seq  int64
	ID   string
	Body json.RawMessage
}

// Item is an envelope to append: its id, its JSON and the blob kept
// beside it (protocol.Envelope.Blob), if any.
type Item struct {
	ID   string
	Body []byte
	Blob []byte
}

// commandsTable: commands are keyed by owner, session and id, so that an id
// names a command only within its session (one token cannot reach another's
// commands by reusing an id).
const commandsTable = `CREATE TABLE IF NOT EXISTS commands (
	owner      TEXT NOT NULL,
	session    TEXT NOT NULL,
	id         TEXT NOT NULL,
	body       BLOB NOT NULL,
	status     TEXT NOT NULL,
	message    TEXT NOT NULL DEFAULT '',
	created_ms INTEGER NOT NULL,
	updated_ms INTEGER NOT NULL,
	PRIMARY KEY (owner, session, id)
);`

const schema = `
CREATE TABLE IF NOT EXISTS sessions (
	id         TEXT PRIMARY KEY,
	info       TEXT NOT NULL DEFAULT '{}',
	owner      TEXT NOT NULL DEFAULT '',
	last_seq   INTEGER NOT NULL DEFAULT 0,
	prompt     TEXT NOT NULL DEFAULT '',
	created_ms INTEGER NOT NULL,
	updated_ms INTEGER NOT NULL
);
` + commandsTable + tombstonesTable + `
CREATE TABLE IF NOT EXISTS envelopes (
	session TEXT NOT NULL,
	seq     INTEGER NOT NULL,
	id      TEXT NOT NULL,
	body    BLOB NOT NULL,
	PRIMARY KEY (session, seq),
	UNIQUE (session, id)
) WITHOUT ROWID;
` + blobsTable + sessionKeysTable

// blobsTable holds what is kept beside an envelope (a cut tool result's
// full text, a prompt's image), stored with the envelope and read only
// when an app asks. A rowid table: large rows do not belong in a WITHOUT
// ROWID table's b-tree.
const blobsTable = `CREATE TABLE IF NOT EXISTS blobs (
	session TEXT NOT NULL,
	id      TEXT NOT NULL,
	data    BLOB NOT NULL,
	UNIQUE (session, id)
);
`

// OpenStore opens (creating if needed) the database at path. The database
// and its -wal and -shm files are mode 0600, whatever the umask.
func OpenStore(path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := privateFiles(path); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	// synchronous=NORMAL survives a crash of the relay; envelopes are
	// committed with FULL, in groups (groupcommit.go), to survive power loss.
	// auto_vacuum first, before WAL writes the header: a new database frees
	// pages back to the file system (ReclaimPages); on an existing one it is
	// a no-op (it would take a VACUUM). temp_store=MEMORY keeps a group
	// commit's savepoint journals in memory, not in a file written at each
	// savepoint (at most MaxGroupAppends batches' pages).
	dsn := "file:" + path + "?_pragma=auto_vacuum(INCREMENTAL)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(ON)&_pragma=temp_store(MEMORY)"
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	if err := quickCheck(w, path); err != nil {
		w.Close()
		return nil, err
	}
	wdb := &sqlDB{w, sqliteSQL}
	if err := migrate(context.Background(), wdb); err != nil {
		w.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	// SQLite made the -wal and -shm files with the database's mode; make sure.
	if err := privateFiles(path); err != nil {
		w.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	r, err := sql.Open("sqlite", strings.Replace(dsn, "_pragma=auto_vacuum(INCREMENTAL)&", "", 1)+"&_pragma=cache_size(-8192)&mode=ro")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	s := &Store{w: wdb, r: &sqlDB{r, sqliteSQL}}
	if err := s.prepareHot(context.Background(), qTombstone, qNewSession, qAppendSession, qInsertEnvelope, qFindEnvelopes, qUpdateSession); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

// privateFiles creates the database file at path mode 0600 if it is
// missing (SQLite would create it 0644 less the umask) and makes it and its
// -wal and -shm files 0600 where they exist.
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrExist) {
		return err
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode().Perm() != 0o600 {
			if err := os.Chmod(p, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error {
	s.closeGroup()
	s.closeStmts()
	if s.r == s.w {
		return s.w.Close()
	}
	return errors.Join(s.r.Close(), s.w.Close())
}

// Appended is what became of an appended item: its sequence number, and
// whether it is new or its id was stored before (with the same content or,
// Conflict, another).
type Appended struct {
	Seq      int64
	New      bool
	Conflict bool
}

// The queries of every append on SQLite (prepared once: prepareHot).
const (
	qTombstone      = `SELECT COUNT(*) FROM tombstones WHERE id = ?`
	qNewSession     = `INSERT INTO sessions (id, created_ms, updated_ms) SELECT ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM sessions WHERE id = ?) ON CONFLICT(id) DO NOTHING`
	qAppendSession  = `SELECT no, last_seq, prompt, owner, info, updated_ms FROM sessions WHERE id = ?`
	qInsertEnvelope = `INSERT INTO envelopes (k, h, id, body) VALUES (?, ?, ?, ?)`
	// qFindEnvelopes is the batch's one lookup of the ids stored before:
	// the rows whose h is one of the batch's (a JSON array), which the
	// caller keeps if they are of the session and have the same id.
	qFindEnvelopes = `SELECT k, id, body FROM envelopes WHERE h IN (SELECT value FROM json_each(?))`
	qUpdateSession = `UPDATE sessions SET last_seq = ?, updated_ms = ?, prompt = ? WHERE id = ?`
)

// appendTx stores items in order in session (created if new) within tx
// and returns what became of each (see Append) and the session's row as
// the append leaves it (what the commit holds: the relay tells the apps
// from it, without reading the row again). SQLite's; PostgreSQL runs the
// same steps in one statement (appendPG).
func (s *Store) appendTx(ctx context.Context, tx sqlTx, session string, items []Item) ([]Appended, SessionInfo, error) {
	for i, it := range items {
		if it.ID == "" {
			return nil, SessionInfo{}, fmt.Errorf("envelope %d has no id", i)
		}
	}
	q := func(query string) txStmt { return s.stmt(ctx, tx, query) }
	// The session's row is locked until commit (PostgreSQL: appends to
	// one session from several nodes take their turns, and a delete waits
	// for them or they for it: see dropSession; SQLite has one writer).
	tomb, newSession, sel := q(qTombstone), q(qNewSession), q(qAppendSession+tx.d.rowLock())
	upd := q(qUpdateSession)
	now := s.clock().UnixMilli()
	if _, err := newSession.ExecContext(ctx, session, now, now, session); err != nil {
		return nil, SessionInfo{}, err
	}
	var no, last, updated int64
	var prompt, owner, info string
	switch err := sel.QueryRowContext(ctx, session).Scan(&no, &last, &prompt, &owner, &info, &updated); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, SessionInfo{}, ErrDeleted // deleted by another node since the insert above
	case err != nil:
		return nil, SessionInfo{}, err
	}
	// A deleted session stays deleted: checked in the append's own
	// transaction once the session's row is held, so a delete between a
	// CLI's claim and its append (on another node: between any two
	// statements of this one) cannot bring the session back; the row the
	// insert above may have made again goes with the rollback.
	var gone int
	if err := tomb.QueryRowContext(ctx, session).Scan(&gone); err != nil {
		return nil, SessionInfo{}, err
	}
	if gone > 0 {
		return nil, SessionInfo{}, ErrDeleted
	}
	if no < 1 || no > maxSessionNo {
		return nil, SessionInfo{}, fmt.Errorf("session number %d is out of range", no)
	}
	if last+int64(len(items)) > maxSeq {
		return nil, SessionInfo{}, fmt.Errorf("the session has %d envelopes: at most %d are kept", last, int64(maxSeq))
	}
	out, next, prompt, err := appendRowsOneByOne(ctx, q, no, last, prompt, items)
	if err != nil {
		return nil, SessionInfo{}, err
	}
	insBlob := q(`INSERT INTO blobs (session, id, data) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`)
	for i, it := range items {
		if out[i].New && len(it.Blob) > 0 {
			if _, err := insBlob.ExecContext(ctx, session, it.ID, it.Blob); err != nil {
				return nil, SessionInfo{}, err
			}
		}
	}
	if next != last {
		if _, err := upd.ExecContext(ctx, next, now, prompt, session); err != nil {
			return nil, SessionInfo{}, err
		}
		updated = now
	}
	return out, SessionInfo{ID: session, Info: json.RawMessage(info), Owner: owner, Prompt: prompt, LastSeq: next, UpdatedMS: updated}, nil
}

// appendRowsOneByOne inserts items after last in the session numbered no,
// one statement each (SQLite: prepared once, in process, no round trip),
// after one lookup of the batch's ids stored already (envkey.go). It
// returns what became of each, the last sequence number and the session's
// first prompt.
func appendRowsOneByOne(ctx context.Context, q func(string) txStmt, no, last int64, prompt string, items []Item) ([]Appended, int64, string, error) {
	hs := make([]int64, len(items))
	list := make([]byte, 0, 1+21*len(items))
	list = append(list, '[')
	for i, it := range items {
		hs[i] = envelopeHash(no, it.ID)
		if i > 0 {
			list = append(list, ',')
		}
		list = strconv.AppendInt(list, hs[i], 10)
	}
	list = append(list, ']')
	// Ids of this session stored before, or earlier in the batch.
	type known struct {
		seq    int64
		body   []byte
		stored bool // body is as stored (encoded)
	}
	seen := make(map[string]known, len(items))
	rows, err := q(qFindEnvelopes).QueryContext(ctx, string(list))
	if err != nil {
		return nil, 0, "", err
	}
	for rows.Next() {
		var k int64
		var id string
		var body []byte
		if err := rows.Scan(&k, &id, &body); err != nil {
			rows.Close()
			return nil, 0, "", err
		}
		if k>>seqBits == no { // another session's row is another envelope
			seen[id] = known{seq: k & maxSeq, body: body, stored: true}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, "", err
	}
	ins := q(qInsertEnvelope)
	out := make([]Appended, len(items))
	next := last
	// One buffer for every body encoded: SQLite copies a bound value, so
	// it is free again once its insert returns.
	var enc []byte
	for i, it := range items {
		if was, ok := seen[it.ID]; ok {
			body := was.body
			if was.stored {
				if body, err = decodeBody(it.ID, was.body); err != nil {
					return nil, 0, "", fmt.Errorf("envelope %s: %w", it.ID, err)
				}
			}
			out[i] = Appended{Seq: was.seq, Conflict: !bytes.Equal(body, it.Body)}
			continue
		}
		enc = encodeBodyInto(enc, it.ID, it.Body)
		if _, err := ins.ExecContext(ctx, envelopeKey(no, next+1), hs[i], it.ID, enc); err != nil {
			return nil, 0, "", err
		}
		next++
		seen[it.ID] = known{seq: next, body: it.Body}
		if prompt == "" {
			prompt = promptOf(it.Body)
		}
		out[i] = Appended{Seq: next, New: true}
	}
	return out, next, prompt, nil
}

// maxPrompt is how much of a session's first prompt the list shows.
const maxPrompt = 200

// promptOf is the text of a user prompt envelope, cut to maxPrompt runes,
// or "" for any other envelope (and for markup Claude Code writes as the
// user, such as slash-command records).
func promptOf(body []byte) string {
	if !bytes.Contains(body, []byte(`"user"`)) {
		return "" // not the user's (most envelopes): not decoded
	}
	var e struct {
		Role string `json:"role"`
		Sub  string `json:"subagent"`
		Ev   struct {
			T    string `json:"t"`
			Text string `json:"text"`
		} `json:"ev"`
	}
	if json.Unmarshal(body, &e) != nil || e.Role != "user" || e.Sub != "" || e.Ev.T != "text" {
		return ""
	}
	t := strings.Join(strings.Fields(e.Ev.Text), " ")
	if strings.HasPrefix(t, "<") {
		return ""
	}
	if r := []rune(t); len(r) > maxPrompt {
		t = string(r[:maxPrompt-1]) + "…"
	}
	return t
}

// Read returns up to limit envelopes of session with a sequence number
// greater than after, in order.
func (s *Store) Read(ctx context.Context, session string, after int64, limit int) ([]Stored, error) {
	s.reads.Add(1)
	if after < 0 || after >= maxSeq {
		return nil, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT e.k, e.id, e.body FROM sessions s, envelopes e
		WHERE s.id = ? AND e.k > s.no * 4294967296 + ? AND e.k <= s.no * 4294967296 + 4294967295 ORDER BY e.k LIMIT ?`, session, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", session, err)
	}
	defer rows.Close()
	var out []Stored
	for rows.Next() {
		var st Stored
		var stored []byte
		if err := rows.Scan(&st.Seq, &st.ID, &stored); err != nil {
			return nil, fmt.Errorf("read %s: %w", session, err)
		}
		st.Seq &= maxSeq
		if st.Body, err = decodeBody(st.ID, stored); err != nil {
			return nil, fmt.Errorf("read %s envelope %d: %w", session, st.Seq, err)
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// ErrNoBlob is returned by Blob when nothing is kept beside an envelope.
var ErrNoBlob = errors.New("no blob")

// Blob returns what is kept beside envelope id of session, or ErrNoBlob.
func (s *Store) Blob(ctx context.Context, session, id string) ([]byte, error) {
	var data []byte
	err := s.r.QueryRowContext(ctx, `SELECT data FROM blobs WHERE session = ? AND id = ?`, session, id).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNoBlob
	}
	if err != nil {
		return nil, fmt.Errorf("read blob %s/%s: %w", session, id, err)
	}
	return data, nil
}

// LastSeq is the highest sequence number of session (0 when none).
func (s *Store) LastSeq(ctx context.Context, session string) (int64, error) {
	var last int64
	err := s.r.QueryRowContext(ctx, `SELECT last_seq FROM sessions WHERE id = ?`, session).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last seq of %s: %w", session, err)
	}
	return last, nil
}

// SessionInfo is what the relay knows of a session.
type SessionInfo struct {
	ID        string          `json:"id"`
	Info      json.RawMessage `json:"info"`             // as announced by the CLI
	Prompt    string          `json:"prompt,omitempty"` // the first prompt, cut to 200 characters
	LastSeq   int64           `json:"lastSeq"`
	UpdatedMS int64           `json:"updated"`
	Owner     string          `json:"-"` // the token the session belongs to (its id)
}

// Announce records what the CLI says of a session (created if new).
func (s *Store) Announce(ctx context.Context, session string, info json.RawMessage) (SessionInfo, error) {
	if !json.Valid(info) || len(info) == 0 || info[0] != '{' {
		return SessionInfo{}, fmt.Errorf("announce %s: info must be a JSON object", session)
	}
	now := s.clock().UnixMilli()
	// An update, and an insert only for a new session: on PostgreSQL an
	// insert that meets a conflict still draws a session number.
	res, err := s.w.ExecContext(ctx, `UPDATE sessions SET info = ?, updated_ms = ? WHERE id = ?`, string(info), now, session)
	if err != nil {
		return SessionInfo{}, fmt.Errorf("announce %s: %w", session, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		// Not if it was deleted (a delete between the CLI's claim and
		// this): the session is not made again, with no owner.
		res, err := s.w.ExecContext(ctx, `INSERT INTO sessions (id, info, created_ms, updated_ms) SELECT ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM tombstones WHERE id = ?)
			ON CONFLICT(id) DO UPDATE SET info = excluded.info, updated_ms = excluded.updated_ms`, session, string(info), now, now, session)
		if err != nil {
			return SessionInfo{}, fmt.Errorf("announce %s: %w", session, err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return SessionInfo{}, fmt.Errorf("announce %s: %w", session, ErrDeleted)
		}
	}
	si, err := s.session(ctx, session)
	if errors.Is(err, sql.ErrNoRows) {
		if gone, derr := s.Deleted(ctx, session); derr == nil && gone {
			return SessionInfo{}, fmt.Errorf("announce %s: %w", session, ErrDeleted)
		}
	}
	return si, err
}

func (s *Store) session(ctx context.Context, id string) (SessionInfo, error) {
	s.sessionReads.Add(1)
	var si SessionInfo
	var info string
	err := s.r.QueryRowContext(ctx, `SELECT id, info, owner, prompt, last_seq, updated_ms FROM sessions WHERE id = ?`, id).Scan(&si.ID, &info, &si.Owner, &si.Prompt, &si.LastSeq, &si.UpdatedMS)
	if err != nil {
		return si, fmt.Errorf("session %s: %w", id, err)
	}
	si.Info = json.RawMessage(info)
	return si, nil
}

// Sessions lists every session, most recently active first.
func (s *Store) Sessions(ctx context.Context) ([]SessionInfo, error) { return s.SessionsOf(ctx, "*") }

// SessionsOf lists the sessions of owner ("*": all), most recently active
// first.
func (s *Store) SessionsOf(ctx context.Context, owner string) ([]SessionInfo, error) {
	// Two queries, so that the owner's uses sessions_by_owner.
	q, args := `SELECT id, info, owner, prompt, last_seq, updated_ms FROM sessions WHERE owner = ? ORDER BY updated_ms DESC, id`, []any{owner}
	if owner == "*" {
		q, args = `SELECT id, info, owner, prompt, last_seq, updated_ms FROM sessions ORDER BY updated_ms DESC, id`, nil
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	var out []SessionInfo
	for rows.Next() {
		var si SessionInfo
		if err := rows.Scan(&si.ID, (*[]byte)(&si.Info), &si.Owner, &si.Prompt, &si.LastSeq, &si.UpdatedMS); err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		out = append(out, si)
	}
	return out, rows.Err()
}

// StoredCommand is a command as the relay keeps it. Commands are stored
// per owner and session: an id names a command only within its session.
type StoredCommand struct {
	Owner   string
	Session string
	ID      string
	Body    json.RawMessage
	Status  string
	Message string
	// Sealed is the message as the machine sealed it, for a sealed
	// session (Frame.SealedMessage); Message is then a neutral text.
	Sealed string
}

// AddCommand stores a command with status (and message), unless its id is
// known in the owner's session: then it returns the stored one and false.
func (s *Store) AddCommand(ctx context.Context, owner, session, id string, body []byte, status, message string) (StoredCommand, bool, error) {
	now := s.clock().UnixMilli()
	res, err := s.w.ExecContext(ctx, `INSERT INTO commands (owner, session, id, body, status, message, created_ms, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(owner, session, id) DO NOTHING`,
		owner, session, id, body, status, message, now, now)
	if err != nil {
		return StoredCommand{}, false, fmt.Errorf("add command %s of %s: %w", id, session, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return StoredCommand{Owner: owner, Session: session, ID: id, Body: body, Status: status, Message: message}, true, nil
	}
	c, err := s.Command(ctx, owner, session, id)
	return c, false, err
}

// A command's status moves one way only: queued → delivered → done or
// rejected (queued may also go straight to done or rejected); done and
// rejected are final. advanceFrom lists, for each status, the statuses it
// may replace.
var advanceFrom = map[string]string{
	"delivered": `('queued')`,
	"done":      `('queued', 'delivered')`,
	"rejected":  `('queued', 'delivered')`,
}

// AdvanceCommand moves a command to status (with message) if that is a
// step forward from where it stands, in one conditional UPDATE: whatever
// order the steps arrive in, a command never goes back, and a final status
// stays. It reports whether the command moved, and where it stands.
func (s *Store) AdvanceCommand(ctx context.Context, owner, session, id, status, message string) (moved bool, _ StoredCommand, _ error) {
	return s.AdvanceCommandSealed(ctx, owner, session, id, status, message, "")
}

// AdvanceCommandSealed is AdvanceCommand with the message as the machine
// sealed it (sealed, kept beside message).
func (s *Store) AdvanceCommandSealed(ctx context.Context, owner, session, id, status, message, sealed string) (moved bool, _ StoredCommand, _ error) {
	from, ok := advanceFrom[status]
	if !ok {
		return false, StoredCommand{}, fmt.Errorf("command %s of %s: no step to status %q", id, session, status)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE commands SET status = ?, message = ?, sealed_message = ?, updated_ms = ? WHERE owner = ? AND session = ? AND id = ? AND status IN `+from,
		status, message, sealed, s.clock().UnixMilli(), owner, session, id)
	if err != nil {
		return false, StoredCommand{}, fmt.Errorf("command %s of %s: %w", id, session, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, StoredCommand{Owner: owner, Session: session, ID: id, Status: status, Message: message, Sealed: sealed}, nil
	}
	c, err := s.Command(ctx, owner, session, id)
	return false, c, err
}

// PendingCommands returns the commands of the owner's session that no CLI
// answered yet (queued, or delivered to a CLI that did not answer), oldest
// first.
func (s *Store) PendingCommands(ctx context.Context, owner, session string) ([]Item, error) {
	rows, err := s.w.QueryContext(ctx, `SELECT id, body FROM commands WHERE owner = ? AND session = ? AND status IN ('queued', 'delivered') ORDER BY created_ms, `+s.w.d.commandOrder(), owner, session)
	if err != nil {
		return nil, fmt.Errorf("pending commands of %s: %w", session, err)
	}
	defer rows.Close()
	var out []Item
	for rows.Next() {
		var it Item
		if err := rows.Scan(&it.ID, &it.Body); err != nil {
			return nil, fmt.Errorf("pending commands of %s: %w", session, err)
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

// CountQueued is the number of queued commands of the owner's session.
func (s *Store) CountQueued(ctx context.Context, owner, session string) (int, error) {
	var n int
	if err := s.w.QueryRowContext(ctx, `SELECT COUNT(*) FROM commands WHERE owner = ? AND session = ? AND status = 'queued'`, owner, session).Scan(&n); err != nil {
		return 0, fmt.Errorf("count queued commands of %s: %w", session, err)
	}
	return n, nil
}

// ExpirePending rejects, with message, the commands made before before
// that no CLI answered (queued, or delivered and never answered), and
// returns them.
func (s *Store) ExpirePending(ctx context.Context, before time.Time, message string) ([]StoredCommand, error) {
	rows, err := s.w.QueryContext(ctx, `UPDATE commands SET status = 'rejected', message = ?, updated_ms = ? WHERE status IN ('queued', 'delivered') AND created_ms < ?
		RETURNING owner, session, id`, message, s.clock().UnixMilli(), before.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("expire pending commands: %w", err)
	}
	defer rows.Close()
	var out []StoredCommand
	for rows.Next() {
		c := StoredCommand{Status: "rejected", Message: message}
		if err := rows.Scan(&c.Owner, &c.Session, &c.ID); err != nil {
			return nil, fmt.Errorf("expire pending commands: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// PruneCommands deletes the commands that reached a final status (done or
// rejected) before before, and returns how many.
func (s *Store) PruneCommands(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM commands WHERE status IN ('done', 'rejected') AND updated_ms < ?`, before.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("prune commands: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// ErrForbidden is returned when a session belongs to another token.
var ErrForbidden = errors.New("the session belongs to another token")

// Claim makes owner the owner of session (creating it) or checks that it
// already is. A deleted session is not made again: ErrDeleted.
func (s *Store) Claim(ctx context.Context, session, owner string) error {
	now := s.clock().UnixMilli()
	// The tombstone is checked in the insert itself: a delete that
	// commits between a check before it and the insert (on another node,
	// or from an app on this one) would otherwise see its session made
	// again, listed with no envelopes.
	if _, err := s.w.ExecContext(ctx, `INSERT INTO sessions (id, owner, created_ms, updated_ms) SELECT ?, ?, ?, ?
		WHERE NOT EXISTS (SELECT 1 FROM sessions WHERE id = ?) AND NOT EXISTS (SELECT 1 FROM tombstones WHERE id = ?) ON CONFLICT(id) DO NOTHING`,
		session, owner, now, now, session, session); err != nil {
		return fmt.Errorf("claim %s: %w", session, err)
	}
	got, err := s.OwnerOf(ctx, session)
	if errors.Is(err, sql.ErrNoRows) {
		// Deleted (the tombstone is committed with the row's removal).
		if gone, derr := s.Deleted(ctx, session); derr != nil || gone {
			return cmp.Or(derr, ErrDeleted)
		}
	}
	if err != nil {
		return err
	}
	if got != owner {
		return ErrForbidden
	}
	return nil
}

// OwnerOf returns the owner of session, or "" and sql.ErrNoRows wrapped when
// there is no such session.
func (s *Store) OwnerOf(ctx context.Context, session string) (string, error) {
	var owner string
	if err := s.w.QueryRowContext(ctx, `SELECT owner FROM sessions WHERE id = ?`, session).Scan(&owner); err != nil {
		return "", fmt.Errorf("owner of %s: %w", session, err)
	}
	return owner, nil
}

// Command returns a stored command of the owner's session.
func (s *Store) Command(ctx context.Context, owner, session, id string) (StoredCommand, error) {
	c := StoredCommand{Owner: owner, Session: session, ID: id}
	var b []byte
	err := s.w.QueryRowContext(ctx, `SELECT body, status, message, sealed_message FROM commands WHERE owner = ? AND session = ? AND id = ?`, owner, session, id).Scan(&b, &c.Status, &c.Message, &c.Sealed)
	if err != nil {
		return c, fmt.Errorf("command %s of %s: %w", id, session, err)
	}
	c.Body = b
	return c, nil
}

// quickCheck runs SQLite's quick_check: a database whose pages were
// overwritten is refused at start instead of failing later, one append or
// read at a time.
func quickCheck(db *sql.DB, path string) error {
	rows, err := db.Query(`PRAGMA quick_check`)
	if err != nil {
		return fmt.Errorf("check %s: %w (the database is damaged or not a ccrelay database; restore it or move it away)", path, err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("check %s: %w", path, err)
		}
		if line != "ok" && len(problems) < 5 {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("check %s: %w (the database is damaged; restore it or move it away)", path, err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("check %s: the database is damaged (quick_check: %s); restore it or move it away", path, strings.Join(problems, "; "))
	}
	return nil
}

// migrateCommands moves a commands table keyed by id alone (older
// versions) to the owner- and session-scoped key, and makes its indexes.
func migrateCommands(w *sql.DB, path string) error {
	var has int
	if err := w.QueryRow(`SELECT COUNT(*) FROM pragma_table_info('commands') WHERE name = 'owner'`).Scan(&has); err != nil {
		return fmt.Errorf("migrate commands in %s: %w", path, err)
	}
	if has == 0 {
		tx, err := w.Begin()
		if err != nil {
			return fmt.Errorf("migrate commands in %s: %w", path, err)
		}
		defer tx.Rollback()
		for _, q := range []string{
			`ALTER TABLE commands RENAME TO commands_v1`,
			commandsTable,
			`INSERT INTO commands (owner, session, id, body, status, message, created_ms, updated_ms)
				SELECT COALESCE(s.owner, ''), c.session, c.id, c.body, c.status, c.message, c.created_ms, c.created_ms
				FROM commands_v1 c LEFT JOIN sessions s ON s.id = c.session`,
			`DROP TABLE commands_v1`,
		} {
			if _, err := tx.Exec(q); err != nil {
				return fmt.Errorf("migrate commands in %s: %w", path, err)
			}
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migrate commands in %s: %w", path, err)
		}
	}
	for _, q := range []string{
		`CREATE INDEX IF NOT EXISTS commands_by_session ON commands (owner, session, status, created_ms)`,
		`CREATE INDEX IF NOT EXISTS commands_by_status ON commands (status, updated_ms)`,
	} {
		if _, err := w.Exec(q); err != nil {
			return fmt.Errorf("index commands in %s: %w", path, err)
		}
	}
	return nil
}

// tombstonesTable: a deleted session leaves its id, owner and time of
// deletion, so that a CLI resending an old outbox cannot bring it back.
const tombstonesTable = `CREATE TABLE IF NOT EXISTS tombstones (
	id         TEXT PRIMARY KEY,
	owner      TEXT NOT NULL,
	deleted_ms INTEGER NOT NULL
);`

// ErrDeleted is returned for a session that was deleted.
var ErrDeleted = errors.New("the session was deleted")

// DeleteSession removes a session of owner with its envelopes and commands,
// and leaves a tombstone. It fails with sql.ErrNoRows (wrapped) when there
// is no such session and ErrForbidden when it belongs to another owner.
func (s *Store) DeleteSession(ctx context.Context, owner, session string) (err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("delete %s: %w", session, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	var got string
	var no int64
	if err := tx.QueryRowContext(ctx, `SELECT owner, no FROM sessions WHERE id = ?`+s.w.d.rowLock(), session).Scan(&got, &no); err != nil {
		return fmt.Errorf("delete %s: %w", session, err)
	}
	if got != owner {
		return ErrForbidden
	}
	if err := dropSession(ctx, tx, session, no); err != nil {
		return fmt.Errorf("delete %s: %w", session, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO tombstones (id, owner, deleted_ms) VALUES (?, ?, ?) ON CONFLICT(id) DO NOTHING`,
		session, owner, s.clock().UnixMilli()); err != nil {
		return fmt.Errorf("delete %s: %w", session, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("delete %s: %w", session, err)
	}
	return nil
}

// dropSession removes session, numbered no, with its envelopes, blobs,
// keys and commands (tx: a transaction of either engine). The caller
// holds the session's row (rowLock) from before it read no.
//
// Why that is enough on PostgreSQL (READ COMMITTED, several nodes): an
// append locks the same row (appendTx) before it writes an envelope or a
// blob, and keeps it until it commits. A delete that finds the row locked
// waits until that append commits, and then gets the row as it is now;
// each later statement of the delete reads a new snapshot, which holds
// everything the append committed, so its envelopes and blobs go too.
// Without the lock, the delete's DELETE FROM envelopes ran on a snapshot
// without the append's rows in flight, and only its DELETE FROM sessions
// waited for them: they stayed, with no session. An append that comes
// after the delete took the row waits on its own lock; once the delete
// commits, the row is gone (ErrDeleted), or, had the append made the row
// anew after the delete's commit, its tombstone check sees the tombstone
// committed with the delete (ErrDeleted, rolled back).
func dropSession(ctx context.Context, tx interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, session string, no int64) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM envelopes WHERE k > ? AND k <= ?`, envelopeKey(no, 0), envelopeKey(no, maxSeq)); err != nil {
		return err
	}
	for _, q := range []string{
		`DELETE FROM blobs WHERE session = ?`,
		`DELETE FROM session_keys WHERE session = ?`,
		`DELETE FROM commands WHERE session = ?`,
		`DELETE FROM cli_held WHERE session = ?`,
		`DELETE FROM sessions WHERE id = ?`,
	} {
		if _, err := tx.ExecContext(ctx, q, session); err != nil {
			return err
		}
	}
	return nil
}

// Deleted says whether session was deleted (has a tombstone).
func (s *Store) Deleted(ctx context.Context, session string) (bool, error) {
	var n int
	if err := s.w.QueryRowContext(ctx, `SELECT COUNT(*) FROM tombstones WHERE id = ?`, session).Scan(&n); err != nil {
		return false, fmt.Errorf("tombstone of %s: %w", session, err)
	}
	return n > 0, nil
}

// PruneInactive deletes at most limit sessions whose last activity is
// before the given time, oldest first, each with its envelopes and
// commands, leaving tombstones (as DeleteSession does), in one
// transaction. It returns the sessions deleted.
func (s *Store) PruneInactive(ctx context.Context, before time.Time, limit int) (_ []SessionInfo, err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("prune sessions: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	// The sessions' rows are held (dropSession). A session an append holds
	// at this moment is active: it is passed over (SKIP LOCKED), not waited
	// for (a group of appends holds several sessions, in its own order).
	rows, err := tx.QueryContext(ctx, `SELECT id, owner, no FROM sessions WHERE updated_ms < ? ORDER BY updated_ms, id LIMIT ?`+s.w.d.rowLockSkip(), before.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("prune sessions: %w", err)
	}
	var gone []SessionInfo
	var nos []int64
	for rows.Next() {
		var si SessionInfo
		var no int64
		if err := rows.Scan(&si.ID, &si.Owner, &no); err != nil {
			rows.Close()
			return nil, fmt.Errorf("prune sessions: %w", err)
		}
		gone = append(gone, si)
		nos = append(nos, no)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("prune sessions: %w", err)
	}
	now := s.clock().UnixMilli()
	for i, si := range gone {
		if err := dropSession(ctx, tx, si.ID, nos[i]); err != nil {
			return nil, fmt.Errorf("prune %s: %w", si.ID, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO tombstones (id, owner, deleted_ms) VALUES (?, ?, ?) ON CONFLICT(id) DO NOTHING`, si.ID, si.Owner, now); err != nil {
			return nil, fmt.Errorf("prune %s: %w", si.ID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("prune sessions: %w", err)
	}
	return gone, nil
}

// ReclaimPages gives at most pages free pages of the database back to the
// file system (PRAGMA incremental_vacuum). Databases created with
// auto_vacuum=INCREMENTAL shrink; on older ones (auto_vacuum off) it does
// nothing: the free pages are reused by later writes, and a copy made with
// `ccrelay backup` is compact. It returns the free pages left.
func (s *Store) ReclaimPages(ctx context.Context, pages int) (int64, error) {
	if s.w.d == postgresSQL {
		return 0, nil // PostgreSQL's autovacuum does it
	}
	if _, err := s.w.ExecContext(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, pages)); err != nil {
		return 0, fmt.Errorf("incremental vacuum: %w", err)
	}
	var free int64
	if err := s.w.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
		return 0, fmt.Errorf("free pages: %w", err)
	}
	return free, nil
}

// Incremental says whether the database frees pages back to the file
// system on ReclaimPages (auto_vacuum=INCREMENTAL: databases created since
// it was set).
func (s *Store) Incremental(ctx context.Context) bool {
	if s.w.d == postgresSQL {
		return false
	}
	var mode int
	if err := s.w.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		return false
	}
	return mode == 2
}

// SizeBytes is the database's size in pages (in use and free) times the
// page size; 0 when it cannot be read.
func (s *Store) SizeBytes(ctx context.Context) int64 {
	var n int64
	if s.w.d == postgresSQL {
		if err := s.r.QueryRowContext(ctx, `SELECT pg_database_size(current_database())`).Scan(&n); err != nil {
			return 0
		}
		return n
	}
	if err := s.r.QueryRowContext(ctx, `SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()`).Scan(&n); err != nil {
		return 0
	}
	return n
}

// Ping checks that the store answers a read.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.r.QueryRowContext(ctx, `SELECT 1 FROM sessions LIMIT 1`).Scan(&one); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("store ping: %w", err)
	}
	return nil
}
