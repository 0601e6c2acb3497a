package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/pgtest"
	"github.com/ccrelay/ccrelay/protocol"
)

// keyEngine opens a database of one engine twice over: raw (to bring it
// to an older version and fill it as that version did) and as the store.
type keyEngine struct {
	name string
	open func(t *testing.T) (raw *sqlDB, store func(t *testing.T) *Store)
}

func keyEngines() []keyEngine {
	return []keyEngine{
		{"sqlite", func(t *testing.T) (*sqlDB, func(*testing.T) *Store) {
			path := filepath.Join(t.TempDir(), "relay.db")
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(ON)")
			if err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(1)
			t.Cleanup(func() { db.Close() })
			return &sqlDB{db, sqliteSQL}, func(t *testing.T) *Store { db.Close(); return openTestStore(t, path) }
		}},
		{"postgres", func(t *testing.T) (*sqlDB, func(*testing.T) *Store) {
			url := pgtest.Start(t).NewDatabase(t)
			db, err := sql.Open("pgx", url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return &sqlDB{db, postgresSQL}, func(t *testing.T) *Store {
				db.Close()
				s, err := OpenPostgres(context.Background(), url)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
		}},
	}
}

// sessionNo is the number of session in s.
func sessionNo(t *testing.T, w *sqlDB, session string) int64 {
	t.Helper()
	var no int64
	if err := w.QueryRowContext(context.Background(), `SELECT no FROM sessions WHERE id = ?`, session).Scan(&no); err != nil {
		t.Fatal(err)
	}
	return no
}

// Two ids of a session that share a hash (forced: a stored row's h set to
// the hash of an id not stored yet) are two envelopes: the new id is
// stored, each is found again as itself when resent, the same id in
// another session is another envelope, and an id twice in a batch is
// stored once. Without the comparison of the ids the new one was taken
// for a resend of the stored one (the sequence number of the other).
func TestEnvelopeKeyCollision(t *testing.T) {
	for _, eng := range keyEngines() {
		t.Run(eng.name, func(t *testing.T) {
			ctx := context.Background()
			_, open := eng.open(t)
			s := open(t)
			check := func(what string, got []Appended, err error, want ...Appended) {
				t.Helper()
				if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s: got %+v %v, want %+v", what, got, err, want)
				}
			}
			res, err := s.Append(ctx, sA, items("a", "b"))
			check("a, b", res, err, Appended{Seq: 1, New: true}, Appended{Seq: 2, New: true})
			no := sessionNo(t, s.w, sA)
			// a's row now has the hash of c (and of no other id).
			if _, err := s.w.ExecContext(ctx, `UPDATE envelopes SET h = ? WHERE id = 'a'`, envelopeHash(no, "c")); err != nil {
				t.Fatal(err)
			}
			res, err = s.Append(ctx, sA, items("c"))
			check("c, whose hash a's row has", res, err, Appended{Seq: 3, New: true})
			res, err = s.Append(ctx, sA, items("c", "b"))
			check("c and b again", res, err, Appended{Seq: 3}, Appended{Seq: 2})
			res, err = s.Append(ctx, sA, []Item{{ID: "c", Body: []byte(`{"id":"c","other":1}`)}})
			check("c again with another body", res, err, Appended{Seq: 3, Conflict: true})
			res, err = s.Append(ctx, sA, items("d", "d", "e"))
			check("d twice in a batch", res, err, Appended{Seq: 4, New: true}, Appended{Seq: 4}, Appended{Seq: 5, New: true})
			// In the one-by-one path too: a batch with a resend in it.
			if _, err := s.w.ExecContext(ctx, `UPDATE envelopes SET h = ? WHERE id = 'b'`, envelopeHash(no, "f")); err != nil {
				t.Fatal(err)
			}
			res, err = s.Append(ctx, sA, items("e", "f", "f"))
			check("e again, f new (b's row has its hash), f again", res, err, Appended{Seq: 5}, Appended{Seq: 6, New: true}, Appended{Seq: 6})
			res, err = s.Append(ctx, sB, items("c", "a"))
			check("the same ids in another session", res, err, Appended{Seq: 1, New: true}, Appended{Seq: 2, New: true})
			got, err := s.Read(ctx, sA, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, st := range got {
				ids = append(ids, fmt.Sprintf("%d:%s", st.Seq, st.ID))
			}
			if want := []string{"1:a", "2:b", "3:c", "4:d", "5:e", "6:f"}; !slices.Equal(ids, want) {
				t.Fatalf("session reads %v, want %v", ids, want)
			}
		})
	}
}

// version10Rows fills a database at version 10 as versions 6 to 10 stored
// envelopes: sessions numbered, rows (k, sn, id, body) with encoded
// bodies. It returns what each session holds.
func version10Rows(t *testing.T, w *sqlDB, per int) map[string][]Stored {
	t.Helper()
	ctx := context.Background()
	want := map[string][]Stored{}
	for n, session := range []string{sA, sB} {
		if _, err := w.ExecContext(ctx, `INSERT INTO sessions (id, last_seq, created_ms, updated_ms) VALUES (?, ?, 1, 1)`, session, per+n); err != nil {
			t.Fatal(err)
		}
		no := sessionNo(t, w, session)
		for seq := int64(1); seq <= int64(per+n); seq++ {
			// The same ids in both sessions, as a fork has.
			id, body := perfBody(sA, int(seq))
			if _, err := w.ExecContext(ctx, `INSERT INTO envelopes (k, sn, id, body) VALUES (?, ?, ?, ?)`, envelopeKey(no, seq), no, id, encodeBody(id, body)); err != nil {
				t.Fatal(err)
			}
			want[session] = append(want[session], Stored{Seq: seq, ID: id, Body: body})
		}
	}
	return want
}

// errStopped stands for a relay stopped in the middle of version 11.
var errStopped = errors.New("stopped")

// A database that version 10 made and filled moves to version 11 on start:
// every envelope read back as it was, each found again when resent (the
// hash the migration computed is the one appends compute), new ones
// numbered on from the last. A start stopped in the middle of version 11
// (after the copy, before its commit) leaves the database as version 10
// left it, and the next start migrates it whole.
func TestUpgradeToEnvelopeHash(t *testing.T) {
	for _, eng := range keyEngines() {
		t.Run(eng.name, func(t *testing.T) {
			ctx := context.Background()
			w, open := eng.open(t)
			i10 := slices.IndexFunc(migrations, func(m migration) bool { return m.version == 10 })
			if err := migrateWith(ctx, w, migrations[:i10+1]); err != nil {
				t.Fatal(err)
			}
			want := version10Rows(t, w, 50)

			// Stopped before version 11 commits.
			stopped := slices.Clone(migrations)
			stopped[i10+1].sqlite = func(ctx context.Context, w *sqlDB) error {
				return envelopesByHashSQLiteThen(ctx, w, func(sqlTx) error { return errStopped })
			}
			stopped[i10+1].pg = func(ctx context.Context, t sqlTx) error {
				if err := envelopesByHashPG(ctx, t); err != nil {
					return err
				}
				return errStopped
			}
			if err := migrateWith(ctx, w, stopped); !errors.Is(err, errStopped) {
				t.Fatalf("stopped migration: %v", err)
			}
			var v, sn int
			if err := w.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_version`).Scan(&v); err != nil || v != 10 {
				t.Fatalf("after the stop: version %d %v", v, err)
			}
			if err := w.QueryRowContext(ctx, `SELECT COUNT(sn) FROM envelopes`).Scan(&sn); err != nil || sn != 101 {
				t.Fatalf("after the stop: %d rows of version 10 (%v), want 101", sn, err)
			}

			s := open(t)
			if err := s.w.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion() || v < 11 {
				t.Fatalf("schema version %d %v", v, err)
			}
			for session, rows := range want {
				got, err := s.Read(ctx, session, 0, 1000)
				if err != nil || fmt.Sprint(got) != fmt.Sprint(rows) {
					t.Fatalf("%s after the upgrade:\n got %v %v\nwant %v", session, got, err, rows)
				}
				var again []Item
				for _, r := range rows {
					again = append(again, Item{ID: r.ID, Body: r.Body})
				}
				res, err := s.Append(ctx, session, again)
				if err != nil {
					t.Fatal(err)
				}
				for i, a := range res {
					if a.New || a.Conflict || a.Seq != rows[i].Seq {
						t.Fatalf("%s: envelope %s resent after the upgrade: %+v, want a duplicate of %d", session, rows[i].ID, a, rows[i].Seq)
					}
				}
			}
			res, err := s.Append(ctx, sA, items("new"))
			if err != nil || len(res) != 1 || !res[0].New || res[0].Seq != int64(len(want[sA])+1) {
				t.Fatalf("a new envelope after the upgrade: %+v %v", res, err)
			}
			// Every row's h is envelopeHash's, whichever computed it (the
			// migration, ccrelay_append on PostgreSQL): half of the ids'
			// hashes have their top bit set.
			rows, err := s.w.QueryContext(ctx, `SELECT k, h, id FROM envelopes`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			n := 0
			for rows.Next() {
				var k, h int64
				var id string
				if err := rows.Scan(&k, &h, &id); err != nil {
					t.Fatal(err)
				}
				if want := envelopeHash(k>>seqBits, id); h != want {
					t.Errorf("envelope %s of session number %d: h %#x, want %#x", id, k>>seqBits, h, want)
				}
				n++
			}
			if err := rows.Err(); err != nil || n != 102 {
				t.Fatalf("%d rows (%v), want 102", n, err)
			}
		})
	}
}

// BenchmarkMigrateEnvelopeHash: version 11 (envelopes copied to the
// table keyed by h) of a database that version 10 filled with 100,000 real
// envelopes (realItems, about 1 KB each, ten sessions), on each engine:
// the seconds the migration takes (migrate-s) and per 100,000 envelopes.
func BenchmarkMigrateEnvelopeHash(b *testing.B) {
	const sessions, per = 10, 10000
	for _, eng := range []string{"sqlite", "postgres"} {
		b.Run(eng, func(b *testing.B) {
			var took time.Duration
			for b.Loop() {
				ctx := context.Background()
				var w *sqlDB
				if eng == "sqlite" {
					db, err := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "relay.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)")
					if err != nil {
						b.Fatal(err)
					}
					db.SetMaxOpenConns(1)
					defer db.Close()
					w = &sqlDB{db, sqliteSQL}
				} else {
					db, err := sql.Open("pgx", pgtest.Start(b).NewDatabase(b))
					if err != nil {
						b.Fatal(err)
					}
					defer db.Close()
					w = &sqlDB{db, postgresSQL}
				}
				i10 := slices.IndexFunc(migrations, func(m migration) bool { return m.version == 10 })
				if err := migrateWith(ctx, w, migrations[:i10+1]); err != nil {
					b.Fatal(err)
				}
				for n := range sessions {
					session := protocol.DeriveID("migrate-bench", strconv.Itoa(n))
					if _, err := w.ExecContext(ctx, `INSERT INTO sessions (id, last_seq, created_ms, updated_ms) VALUES (?, ?, 1, 1)`, session, per); err != nil {
						b.Fatal(err)
					}
					var no int64
					if err := w.QueryRowContext(ctx, `SELECT no FROM sessions WHERE id = ?`, session).Scan(&no); err != nil {
						b.Fatal(err)
					}
					items := realItems(b, session, per)
					tx, err := w.BeginTx(ctx, nil)
					if err != nil {
						b.Fatal(err)
					}
					for i, it := range items {
						if _, err := tx.ExecContext(ctx, `INSERT INTO envelopes (k, sn, id, body) VALUES (?, ?, ?, ?)`, envelopeKey(no, int64(i+1)), no, it.ID, encodeBody(it.ID, it.Body)); err != nil {
							b.Fatal(err)
						}
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				}
				start := time.Now()
				if err := migrateWith(ctx, w, migrations); err != nil {
					b.Fatal(err)
				}
				took += time.Since(start)
			}
			b.ReportMetric(took.Seconds()/float64(b.N), "migrate-s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
