package relay

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// retentionFixture is a store with n sessions, the first half made and
// last active 60 days ago, the others now, each with per envelopes (the
// old sessions' rows are together, as they are when older sessions were
// made first: deleting them frees whole pages).
func retentionFixture(tb testing.TB, n, per int) (*Server, *Store, string, []string, []string, time.Time) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "relay.db")
	st := openTestStore(tb, path)
	srv := NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), testToken)
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	var old, fresh []string
	for i := range n {
		id := fmt.Sprintf("5e55a001-0000-4000-8000-%012d", i)
		at := now
		if i < n/2 {
			at = now.Add(-60 * 24 * time.Hour)
			old = append(old, id)
		} else {
			fresh = append(fresh, id)
		}
		st.now = func() time.Time { return at }
		if err := st.Claim(ctx, id, OwnerID(testToken)); err != nil {
			tb.Fatal(err)
		}
		var items []Item
		for _, e := range envelopes(id, 0, per) {
			items = append(items, Item{ID: protocol.DeriveID(id, fmt.Sprint(len(items))), Body: e})
		}
		if _, err := st.Append(ctx, id, items); err != nil {
			tb.Fatal(err)
		}
	}
	st.now = func() time.Time { return now }
	return srv, st, path, old, fresh, now
}

func fileSize(tb testing.TB, st *Store, path string) int64 {
	tb.Helper()
	if _, err := st.w.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		tb.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return fi.Size()
}

// Retention under load: 1,000 sessions, half inactive for 60 days, while a
// writer appends to the others; a 30-day retention deletes exactly the old
// ones (tombstoned: they cannot come back), the apps are told, and the
// database file shrinks.
func TestRetentionPrunesOldSessions(t *testing.T) {
	srv, st, path, old, fresh, now := retentionFixture(t, 1000, 30)
	ctx := context.Background()
	before := fileSize(t, st, path)
	lister := srv.hub.addLister(OwnerID(testToken), func() {})
	defer srv.hub.removeLister(lister)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	appends := 0
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fresh[i%len(fresh)]
			if _, ferr := srv.storeBatch(ctx, id, []Item{{ID: protocol.DeriveID(id, fmt.Sprint("w", i)), Body: envelopes(id, 1000+i, 1001+i)[0]}}); ferr != nil {
				t.Errorf("append: %+v", ferr)
				return
			}
			appends++
		}
	})
	n := srv.PruneOnce(ctx, Retention{Keep: 30 * 24 * time.Hour, Now: func() time.Time { return now }})
	close(stop)
	wg.Wait()
	if n != len(old) {
		t.Fatalf("pruned %d, want %d", n, len(old))
	}
	list, err := st.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, si := range list {
		left = append(left, si.ID)
	}
	slices.Sort(left)
	if !slices.Equal(left, fresh) {
		t.Fatalf("%d sessions left, want the %d fresh ones", len(left), len(fresh))
	}
	for _, id := range old {
		if gone, _ := st.Deleted(ctx, id); !gone {
			t.Fatalf("%s not tombstoned", id)
		}
	}
	told := 0
	for _, ok := lister.next(); ok; _, ok = lister.next() {
		told++
	}
	if told < min(len(old), subscriberSlack) {
		t.Fatalf("apps told of %d deletions", told)
	}
	after := fileSize(t, st, path)
	if after >= before {
		t.Fatalf("file did not shrink: %d -> %d bytes", before, after)
	}
	t.Logf("file %d -> %d bytes; %d appends while pruning", before, after, appends)
}

// BenchmarkAppendWhilePruning: a writer's p99 append latency on a store of
// 1,000 sessions (half of them older than the retention), without and with
// retention pruning them at the same time.
func BenchmarkAppendWhilePruning(b *testing.B) {
	for _, prune := range []bool{false, true} {
		name := "idle"
		if prune {
			name = "pruning"
		}
		b.Run(name, func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				b.StopTimer()
				srv, _, _, _, fresh, now := retentionFixture(b, 1000, 30)
				ctx := context.Background()
				done := make(chan struct{})
				if prune {
					go func() {
						defer close(done)
						srv.PruneOnce(ctx, Retention{Keep: 30 * 24 * time.Hour, Now: func() time.Time { return now }})
					}()
				} else {
					close(done)
				}
				b.StartTimer()
				for i := 0; ; i++ {
					if i >= 200 {
						select {
						case <-done:
						default:
							if i < 100000 {
								goto more
							}
						}
						break
					}
				more:
					id := fresh[i%len(fresh)]
					t0 := time.Now()
					if _, ferr := srv.storeBatch(ctx, id, []Item{{ID: protocol.DeriveID(id, fmt.Sprint("w", i)), Body: envelopes(id, 1000+i, 1001+i)[0]}}); ferr != nil {
						b.Fatalf("append: %+v", ferr)
					}
					lat = append(lat, time.Since(t0))
				}
				<-done
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		})
	}
}
