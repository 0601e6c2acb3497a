package relay

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/pgtest"
)

// On PostgreSQL a node's appends of different sessions run at once, each
// in its caller's goroutine: one that waits for its session's row (held
// here by another transaction) does not hold back another session's.
// They went one after the other through the one committing goroutine.
func TestPostgresAppendsOfSessionsAtOnce(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Start(t).NewDatabase(t)
	st, err := OpenPostgres(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Append(ctx, sA, items("a0")); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE`, sA); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() {
		_, err := st.Append(ctx, sA, items("a1"))
		held <- err
	}()
	// The append to sA waits for the row.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the append to the held session does not wait for its row")
		}
		time.Sleep(5 * time.Millisecond)
	}
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := st.Append(bctx, sB, items("b1")); err != nil {
		t.Fatalf("an append to another session, while one waits for its row: %v", err)
	}
	select {
	case err := <-held:
		t.Fatalf("the append to the held session ended (%v) while its row was held", err)
	default:
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if last, _ := st.LastSeq(ctx, sA); last != 2 {
		t.Fatalf("%s: last seq %d, want 2", sA, last)
	}
}

// On PostgreSQL, appends of one session sent at once from several
// connections of a node call after in the order of their sequence
// numbers (the relay publishes to apps there), as the committer did.
func TestPostgresAfterInSequenceOrder(t *testing.T) {
	ctx := context.Background()
	st, err := OpenPostgres(ctx, pgtest.Start(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const writers, batches, per = 6, 15, 3
	var mu sync.Mutex
	var last int64
	errs := make(chan error, writers*batches)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				batch := make([]Item, per)
				for k := range batch {
					id := fmt.Sprintf("w%d-%d-%d", w, b, k)
					batch[k] = Item{ID: id, Body: []byte(`{"id":"` + id + `"}`)}
				}
				_, err := st.AppendThen(ctx, sA, batch, func(res []Appended) {
					mu.Lock()
					defer mu.Unlock()
					for _, r := range res {
						if r.Seq != last+1 {
							errs <- fmt.Errorf("after saw seq %d after %d", r.Seq, last)
						}
						last = r.Seq
					}
				})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if last != writers*batches*per {
		t.Fatalf("after saw up to %d, want %d", last, writers*batches*per)
	}
}
