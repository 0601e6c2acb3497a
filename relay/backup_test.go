package relay

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// Backup under load: a copy taken while a writer appends passes
// integrity_check, and a store opened on the copy holds every session
// complete up to its cut point (seq 1..last, each envelope as stored).
func TestBackupUnderLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "relay.db")
	st := openTestStore(t, path)
	srv := NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), testToken)
	ctx := context.Background()
	sessions := make([]string, 20)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("5e55b001-0000-4000-8000-%012d", i)
		if err := st.Claim(ctx, sessions[i], OwnerID(testToken)); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var written atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := sessions[i%len(sessions)]
			from := (i / len(sessions)) * 50
			var items []Item
			for j, e := range envelopes(id, from, from+50) {
				items = append(items, Item{ID: protocol.DeriveID(id, fmt.Sprint(from+j)), Body: e})
			}
			if _, ferr := srv.storeBatch(ctx, id, items); ferr != nil {
				t.Errorf("append: %+v", ferr)
				return
			}
			written.Add(50)
		}
	})
	// Let the writer get going, then copy while it writes.
	deadline := time.Now().Add(30 * time.Second)
	for written.Load() < 5000 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling for the writer's progress, with a deadline
	}
	start := time.Now()
	atStart := written.Load()
	out := filepath.Join(dir, "copy.db")
	rep, err := Backup(ctx, path, out)
	took := time.Since(start)
	during := written.Load() - atStart
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Integrity != "ok" || rep.Sessions != int64(len(sessions)) || rep.Envelopes == 0 {
		t.Fatalf("report %+v", rep)
	}
	t.Logf("backup of %d envelopes in %v while %d were written (%.0f/s)", rep.Envelopes, took, during, float64(during)/took.Seconds())
	cp, err := OpenStore(out)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	var total int64
	for _, id := range sessions {
		last, _ := cp.LastSeq(ctx, id)
		got, err := cp.Read(ctx, id, 0, int(last)+10)
		if err != nil {
			t.Fatal(err)
		}
		want, err := st.Read(ctx, id, 0, int(last))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(got)) != last || len(want) != len(got) {
			t.Fatalf("session %s: copy has %d envelopes, last seq %d", id, len(got), last)
		}
		for i := range got {
			if got[i].Seq != int64(i+1) || got[i].ID != want[i].ID || !bytes.Equal(got[i].Body, want[i].Body) {
				t.Fatalf("session %s position %d differs", id, i)
			}
		}
		total += last
	}
	if total != rep.Envelopes {
		t.Fatalf("sessions hold %d envelopes, report says %d", total, rep.Envelopes)
	}
	// A second backup into the same file is refused.
	if _, err := Backup(ctx, path, out); err == nil {
		t.Fatal("backup over an existing file accepted")
	}
}
