package apiclient

import (
	"context"
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
