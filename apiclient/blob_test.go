package apiclient

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// Blobs go through the outbox with their envelopes and are kept by the
// relay; a batch counts them against its byte limit, so two large ones
// travel in separate frames.
func TestOutboxCarriesBlobs(t *testing.T) {
	r := newRelay(t)
	box, err := OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	var batch []protocol.Envelope
	var fulls [][]byte
	for i := range 3 {
		full := []byte(strings.Repeat(string(rune('a'+i)), 700<<10))
		preview := string(full[:protocol.MaxResultBytes])
		batch = append(batch, envs(sessA, 2*i, 2*i+1)...)
		batch = append(batch, protocol.Envelope{ID: protocol.DeriveID(sessA, "end", string(rune('a'+i))), Time: 5, Role: protocol.RoleAgent,
			Ev:   protocol.Event{T: protocol.KindToolCallEnd, Call: "toolu", Result: &preview, Truncated: true, Full: int64(len(full))},
			Blob: full})
		fulls = append(fulls, full)
	}
	if err := box.Append(context.Background(), sessA, batch); err != nil {
		t.Fatal(err)
	}
	// The batch limit (1 MiB here) holds envelopes and blobs together.
	b, err := box.next(1000, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.envelopes) != 3 || len(b.blobs) != 1 || b.blobs[0].ID != batch[1].ID {
		t.Fatalf("first batch: %d envelopes, %d blobs; want 3 and 1 (the second blob would pass the limit)", len(b.envelopes), len(b.blobs))
	}
	rc := runClient(Config{URL: "http://" + r.addr, Token: token, BatchBytes: 1 << 20, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, box)
	rc.finish(t)
	checkStored(t, sessA, r.ids(sessA), batch)
	for i, full := range fulls {
		got, err := r.st.Blob(context.Background(), sessA, batch[2*i+1].ID)
		if err != nil || !bytes.Equal(got, full) {
			t.Fatalf("blob %d: %d bytes, %v; want %d", i, len(got), err, len(full))
		}
	}
}
