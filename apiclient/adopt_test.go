package apiclient

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
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
