package relay

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ccrelay/ccrelay/internal/pgtest"
)

// A database that version 5 made and filled keeps every envelope through
// version 6 (sessions numbered, envelopes keyed by number and sequence):
// the same bodies, ids and sequence numbers, duplicates still found, new
// appends go on after the last, and a session made after it gets the next
// number.
func TestUpgradeKeepsEnvelopes(t *testing.T) {
	engines := []struct {
		name string
		open func(t *testing.T) (*sqlDB, func(*testing.T) *Store)
	}{
		{"sqlite", func(t *testing.T) (*sqlDB, func(*testing.T) *Store) {
			path := filepath.Join(t.TempDir(), "relay.db")
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
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
				s, err := OpenPostgres(context.Background(), url)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
		}},
	}
	for _, eng := range engines {
		t.Run(eng.name, func(t *testing.T) {
			ctx := context.Background()
			w, open := eng.open(t)
			i5 := slices.IndexFunc(migrations, func(m migration) bool { return m.version == 5 })
			if err := migrateWith(ctx, w, migrations[:i5+1]); err != nil {
				t.Fatal(err)
			}
			// What version 5 stored: two sessions, bodies as they came.
			want := map[string][]Stored{}
			for n, session := range []string{sA, sB} {
				if _, err := w.ExecContext(ctx, `INSERT INTO sessions (id, last_seq, created_ms, updated_ms) VALUES (?, ?, 1, 1)`, session, 3+n); err != nil {
					t.Fatal(err)
				}
				for seq := int64(1); seq <= int64(3+n); seq++ {
					id, body := perfBody(session, int(seq))
					if _, err := w.ExecContext(ctx, `INSERT INTO envelopes (session, seq, id, body) VALUES (?, ?, ?, ?)`, session, seq, id, body); err != nil {
						t.Fatal(err)
					}
					want[session] = append(want[session], Stored{Seq: seq, ID: id, Body: body})
				}
			}
			s := open(t)
			var v int
			if err := s.w.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion() {
				t.Fatalf("schema version %d %v", v, err)
			}
			for session, rows := range want {
				got, err := s.Read(ctx, session, 0, 100)
				if err != nil || fmt.Sprint(got) != fmt.Sprint(rows) {
					t.Fatalf("%s after the upgrade:\n got %v %v\nwant %v", session, got, err, rows)
				}
			}
			id, body := perfBody(sA, 2)
			res, err := s.Append(ctx, sA, []Item{{ID: id, Body: body}, {ID: "new", Body: []byte(`{"id":"new"}`)}})
			if err != nil || res[0].Seq != 2 || res[0].New || res[0].Conflict || res[1].Seq != 4 || !res[1].New {
				t.Fatalf("append after the upgrade: %+v %v", res, err)
			}
			if _, err := s.Append(ctx, sC, items("c1")); err != nil {
				t.Fatal(err)
			}
			var nos []int64
			rows, err := s.w.QueryContext(ctx, `SELECT no FROM sessions ORDER BY no`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var no int64
				rows.Scan(&no)
				nos = append(nos, no)
			}
			rows.Close()
			if len(nos) != 3 || nos[0] == nos[1] || nos[1] == nos[2] {
				t.Fatalf("session numbers %v", nos)
			}
			if got, _ := s.Read(ctx, sC, 0, 10); len(got) != 1 || got[0].Seq != 1 || got[0].ID != "c1" {
				t.Fatalf("a new session reads %+v", got)
			}
		})
	}
}

// A relay killed between a SQLite migration's step and the line that
// records its version (SQLite runs each step in a statement or a
// transaction of its own, then records it) starts again: the step runs a
// second time, and must then change nothing and succeed, whatever
// version it is. PostgreSQL runs a step and its record in one
// transaction.
func TestSQLiteMigrationStepRunsAgain(t *testing.T) {
	for i, m := range migrations {
		t.Run(fmt.Sprint(m.version), func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "relay.db")
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(ON)")
			if err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(1)
			defer db.Close()
			w := &sqlDB{db, sqliteSQL}
			if err := migrateWith(ctx, w, migrations[:i]); err != nil {
				t.Fatal(err)
			}
			// The step ran; its version was not recorded.
			if err := m.sqlite(ctx, w); err != nil {
				t.Fatalf("version %d's step: %v", m.version, err)
			}
			if err := migrateWith(ctx, w, migrations); err != nil {
				t.Fatalf("a start after version %d's step, before its record: %v", m.version, err)
			}
			var v int
			if err := w.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion() {
				t.Fatalf("schema version %d %v", v, err)
			}
		})
	}
}
