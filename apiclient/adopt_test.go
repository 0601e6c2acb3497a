package apiclient

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/relay"
)

// Adopt copies what an ended run's outbox did not send (and only that),
// session by session in order, into this run's outbox, in batches of at
// most adoptBatch; an outbox that does not exist adopts nothing.
func TestOutboxAdopt(t *testing.T) {
	ctx := context.Background()
	const a, b = "11111111-2222-4333-8444-555555555555", "66666666-2222-4333-8444-555555555555"
	oldDir, newDir := filepath.Join(t.TempDir(), "old"), filepath.Join(t.TempDir(), "new")
	old, err := OpenOutbox(oldDir)
	if err != nil {
		t.Fatal(err)
	}
	old.Append(ctx, a, envs(a, 0, 10))
	// The first 10 were acknowledged; 600 of a and 5 of b were not.
	first, err := old.next(10, MaxBatchBytes)
	if err != nil || len(first.ids) != 10 {
		t.Fatalf("first batch %v, %v", first, err)
	}
	old.ack(first.end)
	old.Append(ctx, a, envs(a, 10, 610))
	old.Append(ctx, b, envs(b, 0, 5))
	old.Close()

	box, err := OpenOutbox(newDir)
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	box.Append(ctx, b, envs(b, 100, 101)) // this run's own
	n, err := box.Adopt(oldDir)
	if err != nil || n != 605 {
		t.Fatalf("adopted %d, %v", n, err)
	}
	var want []string
	for _, e := range append(append(envs(b, 100, 101), envs(a, 10, 610)...), envs(b, 0, 5)...) {
		want = append(want, e.ID)
	}
	if got := drain(t, box); !slices.Equal(got, want) {
		t.Fatalf("after adopt: %d ids, want %d", len(got), len(want))
	}
	if n, err := box.Adopt(filepath.Join(t.TempDir(), "none")); n != 0 || err != nil {
		t.Fatalf("adopting nothing: %d, %v", n, err)
	}
}

// What Adopt copies keeps its blobs (a full tool result, a pasted image),
// each with its own envelope, and the relay receives them; an envelope
// without a blob gets none.
func TestOutboxAdoptKeepsBlobs(t *testing.T) {
	ctx := context.Background()
	r := newRelay(t)
	oldDir := filepath.Join(t.TempDir(), "old")
	old, err := OpenOutbox(oldDir)
	if err != nil {
		t.Fatal(err)
	}
	full := []byte(strings.Repeat("full result ", 40<<10))
	preview := string(full[:protocol.MaxResultBytes])
	image := []byte("\x89PNG\r\n\x1a\n pasted image")
	imageID := protocol.DeriveID(sessA, "image") // a file's blob is named by its ref
	batch := envs(sessA, 0, 3)
	batch = append(batch,
		protocol.Envelope{ID: protocol.DeriveID(sessA, "end"), Time: 5, Role: protocol.RoleAgent,
			Ev:   protocol.Event{T: protocol.KindToolCallEnd, Call: "toolu", Result: &preview, Truncated: true, Full: int64(len(full))},
			Blob: full},
		protocol.Envelope{ID: imageID, Time: 6, Role: protocol.RoleUser,
			Ev:   protocol.Event{T: protocol.KindFile, Ref: imageID, Name: "paste.png", Size: new(int64(len(image))), MimeType: "image/png", Image: &protocol.Image{Width: 2, Height: 3}},
			Blob: image})
	batch = append(batch, envs(sessA, 3, 5)...)
	if err := old.Append(ctx, sessA, batch); err != nil {
		t.Fatal(err)
	}
	// The first envelope was acknowledged; the rest were not.
	first, err := old.next(1, MaxBatchBytes)
	if err != nil || len(first.ids) != 1 {
		t.Fatalf("first batch %v, %v", first, err)
	}
	old.ack(first.end)
	old.Close()

	box, err := OpenOutbox(filepath.Join(t.TempDir(), "new"))
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	if n, err := box.Adopt(oldDir); err != nil || n != len(batch)-1 {
		t.Fatalf("adopted %d, %v; want %d", n, err, len(batch)-1)
	}
	b, err := box.next(1000, MaxBatchBytes)
	if err != nil || b == nil {
		t.Fatalf("adopted batch %v, %v", b, err)
	}
	var blobIDs []string
	for _, bl := range b.blobs {
		blobIDs = append(blobIDs, bl.ID)
	}
	if want := []string{batch[3].ID, batch[4].ID}; !slices.Equal(blobIDs, want) {
		t.Fatalf("adopted blobs of %v, want %v", blobIDs, want)
	}
	rc := runClient(Config{URL: "http://" + r.addr, Token: token, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, box)
	rc.finish(t)
	checkStored(t, sessA, r.ids(sessA), batch[1:])
	for _, e := range batch[1:] {
		got, err := r.st.Blob(ctx, sessA, e.ID)
		switch {
		case e.Blob == nil && !errors.Is(err, relay.ErrNoBlob):
			t.Errorf("envelope %s: blob %q, %v; want none", e.ID, got, err)
		case e.Blob != nil && (err != nil || !bytes.Equal(got, e.Blob)):
			t.Errorf("envelope %s: blob of %d bytes, %v; want %d", e.ID, len(got), err, len(e.Blob))
		}
	}
}
