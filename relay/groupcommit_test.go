package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// Envelopes are committed with synchronous=FULL (fsynced at the commit):
// what the relay acks survives power loss, not only a crash of the relay;
// the rest of the store stays NORMAL.
func TestStoreSynchronousFull(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	session := "a0000000-0000-4000-8000-000000000001"
	if _, err := st.Append(context.Background(), session, groupItems(session, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if m := st.group.mode.Load(); m != 2 { // 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA
		t.Fatalf("envelopes committed with synchronous = %d, want 2 (FULL)", m)
	}
	var mode int
	if err := st.w.QueryRow(`PRAGMA synchronous`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != 1 {
		t.Fatalf("synchronous = %d after an append, want 1 (NORMAL)", mode)
	}
}

func groupItems(session string, from, n int) []Item {
	var items []Item
	for i := from; i < from+n; i++ {
		id := protocol.DeriveID(session, fmt.Sprint(i))
		items = append(items, Item{ID: id, Body: fmt.Appendf(nil, `{"id":%q,"time":1,"role":"user","ev":{"t":"text","text":"%0300d"}}`, id, i)})
	}
	return items
}

// Appends from many connections at once are committed in groups (fewer
// commits than appends); each is still all or nothing (one that fails does
// not take its group with it), and the after calls of a session come in the
// order of its sequence numbers.
func TestGroupCommit(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	ctx := context.Background()
	const writers, batches, per = 8, 40, 5
	var mu sync.Mutex
	seen := map[string]int64{} // session -> last seq seen by after
	var wg sync.WaitGroup
	errs := make(chan error, writers*batches)
	for w := range writers {
		session := fmt.Sprintf("a0000000-0000-4000-8000-%012d", w)
		wg.Go(func() {
			for b := range batches {
				_, err := st.AppendThen(ctx, session, groupItems(session, b*per, per), func(res []Appended) {
					mu.Lock()
					defer mu.Unlock()
					for _, r := range res {
						if r.Seq != seen[session]+1 {
							errs <- fmt.Errorf("%s: after saw seq %d after %d", session, r.Seq, seen[session])
						}
						seen[session] = r.Seq
					}
				})
				if err != nil {
					errs <- err
				}
				// A failing append (an item without id) in between.
				if _, err := st.Append(ctx, session, []Item{{Body: []byte(`{}`)}}); err == nil {
					errs <- fmt.Errorf("an item without id was stored")
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := range writers {
		session := fmt.Sprintf("a0000000-0000-4000-8000-%012d", w)
		rows, err := st.Read(ctx, session, 0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != batches*per {
			t.Fatalf("%s: %d stored, want %d", session, len(rows), batches*per)
		}
	}
	appends := int64(writers * batches * 2)
	groups := st.group.groups.Load()
	t.Logf("%d appends in %d groups", appends, groups)
	if groups >= appends {
		t.Fatalf("%d appends in %d groups: nothing was grouped", appends, groups)
	}
}

// An append after Close fails rather than hang.
func TestAppendAfterClose(t *testing.T) {
	st, err := OpenStore(filepath.Join(t.TempDir(), "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := st.Append(context.Background(), "a0000000-0000-4000-8000-000000000000", groupItems("x", 0, 1)); err == nil {
		t.Fatal("append after close succeeded")
	}
}

// BenchmarkStoreDurability: envelopes/s stored by 8 connections appending
// batches of 10 envelopes of 400 bytes, with synchronous=FULL and group
// commit (the store as it is) against synchronous=NORMAL with every batch
// committed alone (as before), the same rows.
func BenchmarkStoreDurability(b *testing.B) {
	for _, tc := range []struct {
		name  string
		mode  string
		group int
	}{
		{"full-group", "FULL", 0},
		{"normal-alone", "NORMAL", 1},
		{"full-alone", "FULL", 1},
	} {
		b.Run(tc.name, func(b *testing.B) {
			st, err := OpenStore(filepath.Join(b.TempDir(), "relay.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			st.group.max, st.group.synchronous = tc.group, tc.mode
			const writers, per = 8, 10
			ctx := context.Background()
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range writers {
				session := fmt.Sprintf("a0000000-0000-4000-8000-%012d", w)
				wg.Go(func() {
					for i := w; i < b.N; i += writers {
						if _, err := st.Append(ctx, session, groupItems(session, i*per, per)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N*per)/b.Elapsed().Seconds(), "envelopes/s")
		})
	}
}

// The relay's routes hold a command only until its CLI answers it: a CLI
// connected for days does not make them grow with every command.
func TestAnsweredCommandsLeaveRoutes(t *testing.T) {
	r := startTestRelay(t)
	cli := r.dial(t, testToken, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`{}`)})
	if f := recv(t, cli); f.Type != protocol.FrameAck {
		t.Fatalf("%+v", f)
	}
	app := r.dial(t, testToken, "/ws/app")
	const n = 50
	for i := range n {
		id := protocol.DeriveID("cmd", fmt.Sprint(i))
		send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: id, Kind: protocol.CommandPrompt, Text: "hi"}})
		if f := recv(t, cli); f.Type != protocol.FrameCommand || f.Command.ID != id {
			t.Fatalf("%+v", f)
		}
		send(t, cli, protocol.Frame{Type: protocol.FrameResult, Session: s1, Command: &protocol.Command{ID: id}, Status: protocol.StatusDone})
		if f := recv(t, cli); f.Type != protocol.FrameAck {
			t.Fatalf("%+v", f)
		}
	}
	r.relay.peersMu.Lock()
	left := len(r.relay.delivered)
	r.relay.peersMu.Unlock()
	if left != 0 {
		t.Fatalf("%d answered commands still routed", left)
	}
}

// A group is what waits when the committer takes its first append, and it
// closes at the first bound it meets: its appends (max), its envelope
// bytes (the append that crosses maxBytes is the last), or the time spent
// taking them (gather, on the committer's clock: here 1 ms a reading).
// What is left goes in the next group. Six appends wait behind a group the
// test holds open.
func TestGroupBounds(t *testing.T) {
	const waiting = 6
	each := 0 // the bytes of one waiting append
	for _, it := range groupItems("a0000000-0000-4000-8000-000000000000", 0, 3) {
		each += len(it.Body)
	}
	for _, tc := range []struct {
		name     string
		max      int
		maxBytes int
		gather   time.Duration
		want     []int // the sizes of the groups after the held one
	}{
		{"nothing bounds it", 0, 0, time.Hour, []int{6}},
		{"appends", 4, 0, time.Hour, []int{4, 2}},
		{"bytes", 0, 2*each + each/2, time.Hour, []int{3, 3}},
		{"bytes, one alone", 0, each, time.Hour, []int{1, 1, 1, 1, 1, 1}},
		{"time", 0, 0, 2500 * time.Microsecond, []int{3, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
			var clock atomic.Int64
			st.group.max, st.group.maxBytes, st.group.gather = tc.max, tc.maxBytes, tc.gather
			st.group.now = func() time.Time { return time.Unix(0, clock.Add(int64(time.Millisecond))) }
			var mu sync.Mutex
			var sizes []int
			st.group.committed = func(n int) {
				mu.Lock()
				defer mu.Unlock()
				sizes = append(sizes, n)
			}
			ctx := context.Background()
			release := make(chan struct{})
			held := make(chan error, 1)
			go func() {
				session := "a0000000-0000-4000-8000-00000000ffff"
				_, err := st.AppendThen(ctx, session, groupItems(session, 0, 1), func([]Appended) { <-release })
				held <- err
			}()
			// The others queue once the held group is taken.
			deadline := time.Now().Add(30 * time.Second)
			for {
				mu.Lock()
				n := len(sizes)
				mu.Unlock()
				if n == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the first append was not taken")
				}
				time.Sleep(time.Millisecond)
			}
			var wg sync.WaitGroup
			errs := make(chan error, waiting)
			for w := range waiting {
				session := fmt.Sprintf("a0000000-0000-4000-8000-%012d", w)
				wg.Go(func() {
					if _, err := st.Append(ctx, session, groupItems(session, 0, 3)); err != nil {
						errs <- err
					}
				})
			}
			for st.group.waiting.Load() != waiting {
				if time.Now().After(deadline) {
					t.Fatalf("%d appends wait, want %d", st.group.waiting.Load(), waiting)
				}
				time.Sleep(time.Millisecond)
			}
			close(release)
			wg.Wait()
			if err := <-held; err != nil {
				t.Fatal(err)
			}
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := append([]int{1}, tc.want...); !slices.Equal(sizes, want) {
				t.Fatalf("groups of %v, want %v", sizes, want)
			}
		})
	}
}

// A lone append commits at once: the committer does not wait for others
// to come, however long it may spend taking a group's appends.
func TestGroupLoneAppendAtOnce(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	st.group.gather = time.Hour
	var groups atomic.Int64
	st.group.committed = func(int) { groups.Add(1) }
	session := "a0000000-0000-4000-8000-000000000001"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 3 {
		if _, err := st.Append(ctx, session, groupItems(session, i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if g := groups.Load(); g != 3 {
		t.Fatalf("3 appends one after the other in %d groups", g)
	}
}
