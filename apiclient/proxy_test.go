package apiclient

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/testutil"
)

// (c) A proxy that cuts the connection at random points: the relay still
// stores every envelope exactly once, in order.
func TestClientThroughCuttingProxy(t *testing.T) {
	r := newRelay(t)
	proxy := testutil.StartCutProxy(t, r.addr, 42, 2000, 60000)
	box, err := OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	rc := runClient(Config{URL: "http://" + proxy.Addr, Token: token, BatchSize: 40,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}, box)
	ctx := context.Background()
	const n = 3000
	all := envs(sessS, 0, n)
	for i := 0; i < n; i += 250 {
		if err := box.Append(ctx, sessS, all[i:i+250]); err != nil {
			t.Fatal(err)
		}
	}
	rc.finish(t)
	cuts := proxy.Cuts()
	if cuts < 3 {
		t.Fatalf("only %d cuts: the test did not cut anything worth testing", cuts)
	}
	r.halt()
	checkStored(t, sessS, r.ids(sessS), all)
	t.Logf("%d envelopes through %d cut connections", n, cuts)
}

// A path that cuts every connection after the same number of bytes, fewer
// than a whole batch: resent whole, the batch would be lost on every
// connection and nothing delivered. The client sends smaller batches after
// one is lost, so everything arrives, exactly once, in order.
func TestClientThroughPathShorterThanABatch(t *testing.T) {
	r := newRelay(t)
	const quota = 40000 // bytes a connection carries to the relay
	proxy := testutil.StartCutProxy(t, r.addr, 1, quota, 1)
	box, err := OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	rc := runClient(Config{URL: "http://" + proxy.Addr, Token: token,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}, box)
	ctx := context.Background()
	all := envs(sessS, 0, 600)
	for i := range all {
		all[i].Ev.Text = strings.Repeat("x", 1000) // a default batch (200) is about 240 kB
	}
	if err := box.Append(ctx, sessS, all); err != nil {
		t.Fatal(err)
	}
	rc.finish(t)
	r.halt()
	checkStored(t, sessS, r.ids(sessS), all)
	if proxy.Cuts() < 3 {
		t.Fatalf("only %d cuts: the path carried whole batches", proxy.Cuts())
	}
	t.Logf("%d envelopes through %d cut connections", len(all), proxy.Cuts())
}

func TestBatchLimit(t *testing.T) {
	l := batchLimit{count: 200, bytes: MaxBatchBytes}
	for range 20 {
		l.shrink()
	}
	if l.count != 1 || l.bytes != minBatchBytes {
		t.Fatalf("shrunk to %+v, want 1 envelope and %d bytes", l, minBatchBytes)
	}
	for range 100 {
		l.grow(200, MaxBatchBytes)
	}
	if l.count != 200 || l.bytes != MaxBatchBytes {
		t.Fatalf("grown back to %+v, want the configured bounds", l)
	}
	small := batchLimit{count: 3, bytes: 1000}
	small.shrink()
	if small.count != 1 || small.bytes != 1000 {
		t.Fatalf("a bound below the floor moved up: %+v", small)
	}
}
