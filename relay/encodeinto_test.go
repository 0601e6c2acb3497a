package relay

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"testing"
)

// Bodies encoded one after another into one buffer are each what
// encodeBody gives, and none of them is written over (nor is the buffer
// ever a body's own memory: the next would write over that body).
func TestEncodeBodyIntoReusedBuffer(t *testing.T) {
	id, plain := perfBody(s1, 1)
	items := append(goldenItems(t),
		Item{ID: id, Body: []byte(`{"time":1,"id":"` + id + `"}`)}, // stored as it came
		Item{ID: id, Body: plain},
		Item{ID: id, Body: []byte{1}},
		Item{ID: id, Body: plain})
	orig := make([][]byte, len(items))
	for i, it := range items {
		orig[i] = bytes.Clone(it.Body)
	}
	var buf []byte
	for i, it := range items {
		buf = encodeBodyInto(buf, it.ID, it.Body)
		if want := encodeBody(it.ID, orig[i]); !bytes.Equal(buf, want) {
			t.Fatalf("envelope %d (%s): encoded into the buffer %q, want %q", i, it.ID, buf, want)
		}
	}
	for i, it := range items {
		if !bytes.Equal(it.Body, orig[i]) {
			t.Fatalf("envelope %d (%s) was written over: %q, was %q", i, it.ID, it.Body, orig[i])
		}
	}
}

// An append allocates less than the bodies it stores: each body is
// encoded into one buffer for the batch (SQLite copies what is bound), not
// into memory of its own.
func TestAppendAllocatesLessThanItsBodies(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	const n = 3000
	items := realItems(t, s1, n+100)
	ctx := context.Background()
	if _, err := st.Append(ctx, s1, items[:100]); err != nil { // the statements prepared
		t.Fatal(err)
	}
	var body int
	for _, it := range items[100:] {
		body += len(it.Body)
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := 100; i < len(items); i += 100 {
		if _, err := st.Append(ctx, s1, items[i:i+100]); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&m1)
	alloc := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("%d bytes allocated an envelope, for bodies of %d bytes", alloc/n, body/n)
	if alloc >= uint64(body) {
		t.Errorf("appends of %d bytes of bodies allocated %d bytes", body, alloc)
	}
}
