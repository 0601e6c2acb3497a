package relay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// A session deleted (or pruned) on one node while two nodes append to it
// leaves nothing behind: no envelope, no blob, no session row, whichever
// way the delete and the appends meet. Each round is a new session; its
// appenders (two per node, each envelope pair with a blob) append until
// they are told the session is gone, and the delete comes once appends are
// under way. SQLite has one relay process per file: its appenders share
// one Store.
func suiteDeleteRacingAppends(t *testing.T, open func(t *testing.T) *Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes := raceNodes(t, open)
	first := nodes[0]
	const rounds = 30
	left := 0 // rounds that left envelopes behind
	for round := range rounds {
		session := fmt.Sprintf("dddddddd-%04d-4444-8444-444444444444", round)
		if err := first.Claim(ctx, session, "alice"); err != nil {
			t.Fatal(err)
		}
		raceDelete(ctx, t, round, nodes, func(s *Store, id string) error {
			batch := items(id+"a", id+"b")
			batch[0].Blob = []byte("full text of " + id)
			if _, err := s.Append(ctx, session, batch); err != nil {
				return fmt.Errorf("append: %w", err)
			}
			return nil
		}, func() {
			if round%2 == 0 {
				if err := first.DeleteSession(ctx, "alice", session); err != nil {
					t.Errorf("round %d: delete: %v", round, err)
					cancel()
				}
				return
			}
			// Retention: prune until the session is gone (a session
			// appended to at that moment may be passed over, and taken at
			// a later try).
			for ctx.Err() == nil {
				gone, err := first.PruneInactive(ctx, time.Now().Add(time.Hour), 10)
				if err != nil {
					t.Errorf("round %d: prune: %v", round, err)
					cancel()
				}
				if len(gone) > 0 {
					if gone[0].ID != session || len(gone) != 1 {
						t.Errorf("round %d: pruned %+v", round, gone)
					}
					break
				}
			}
		})
		var n int
		if err := first.w.QueryRowContext(ctx, `SELECT COUNT(*) FROM envelopes e WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.no = e.k >> 32)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			left++
		}
	}
	for _, q := range []struct {
		what, query string
		want        int
	}{
		{"envelopes of deleted sessions", `SELECT COUNT(*) FROM envelopes e WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.no = e.k >> 32)`, 0},
		{"blobs of deleted sessions", `SELECT COUNT(*) FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = b.session)`, 0},
		{"deleted sessions listed", `SELECT COUNT(*) FROM sessions s WHERE EXISTS (SELECT 1 FROM tombstones d WHERE d.id = s.id)`, 0},
		{"tombstones", `SELECT COUNT(*) FROM tombstones`, rounds},
	} {
		var n int
		if err := first.w.QueryRowContext(ctx, q.query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != q.want {
			t.Errorf("%d %s, want %d (%d of %d rounds left envelopes)", n, q.what, q.want, left, rounds)
		}
	}
}

// What a CLI does before and beside its appends (claim the session as the
// relay does, announce it, store its keys), racing a delete on another
// node, neither brings the session back nor leaves anything of it: no
// session row (listed, or owned by no one), no key, no envelope.
func suiteDeleteRacingClaims(t *testing.T, open func(t *testing.T) *Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes := raceNodes(t, open)
	first := nodes[0]
	const rounds = 30
	for round := range rounds {
		session := fmt.Sprintf("eeeeeeee-%04d-4444-8444-444444444444", round)
		if err := first.Claim(ctx, session, "alice"); err != nil {
			t.Fatal(err)
		}
		raceDelete(ctx, t, round, nodes, func(s *Store, id string) error {
			// As the relay claims (Server.claim): a tombstone refuses,
			// else the session is claimed.
			if gone, err := s.Deleted(ctx, session); err != nil || gone {
				return cmp.Or(err, ErrDeleted)
			}
			if err := s.Claim(ctx, session, "alice"); err != nil {
				return err
			}
			if _, err := s.Announce(ctx, session, json.RawMessage(`{"title":"`+id+`"}`)); err != nil {
				return err
			}
			if err := s.PutSessionKeys(ctx, session, "machine", []protocol.WrappedKey{{Device: id, Wrapped: "key"}}); err != nil {
				return err
			}
			_, err := s.Append(ctx, session, items(id))
			return err
		}, func() {
			if err := first.DeleteSession(ctx, "alice", session); err != nil {
				t.Errorf("round %d: delete: %v", round, err)
				cancel()
			}
		})
	}
	var back []string
	rows, err := first.w.QueryContext(ctx, `SELECT s.id || ' (owner ' || s.owner || ')' FROM sessions s WHERE EXISTS (SELECT 1 FROM tombstones d WHERE d.id = s.id)`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		back = append(back, s)
	}
	rows.Close()
	if len(back) > 0 {
		t.Errorf("%d of %d deleted sessions came back: %v", len(back), rounds, back)
	}
	for _, q := range []struct{ what, query string }{
		{"keys of deleted sessions", `SELECT COUNT(*) FROM session_keys k WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = k.session)`},
		{"envelopes of deleted sessions", `SELECT COUNT(*) FROM envelopes e WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.no = e.k >> 32)`},
	} {
		var n int
		if err := first.w.QueryRowContext(ctx, q.query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d %s left", n, q.what)
		}
	}
}

// raceNodes is the stores of the nodes a race test runs on: the same Store
// twice for SQLite (one relay process per file), two Stores for Postgres.
func raceNodes(t *testing.T, open func(t *testing.T) *Store) []*Store {
	first := open(t)
	if first.w.d == postgresSQL {
		return []*Store{first, open(t)}
	}
	return []*Store{first, first}
}

// raceDelete is one round of a delete racing other work: two workers on
// each node call step (with an id naming the worker and the step,
// "n0-g1-5") until it returns ErrDeleted, and del runs once the workers
// are under way (a worker that ends early does not hold it back). It
// returns when every worker has ended, and fails the test when ctx ended
// first.
func raceDelete(ctx context.Context, t *testing.T, round int, nodes []*Store, step func(s *Store, id string) error, del func()) {
	t.Helper()
	begun := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for n, s := range nodes {
		for g := range 2 {
			wg.Go(func() {
				defer once.Do(func() { close(begun) })
				for i := 0; ctx.Err() == nil; i++ {
					err := step(s, fmt.Sprintf("n%d-g%d-%d", n, g, i))
					if errors.Is(err, ErrDeleted) {
						return
					} else if err != nil {
						t.Errorf("round %d: %v", round, err)
						return
					}
					if i == 3 {
						once.Do(func() { close(begun) })
					}
				}
			})
		}
	}
	<-begun
	del()
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("round %d: %v", round, ctx.Err())
	}
}
