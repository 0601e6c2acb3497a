package relay

import (
	"encoding/json"
	"runtime"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
)

// A batch of the envelopes a CLI sends all the time is checked without
// decoding them (protocol.QuickCheck): next to no allocation per envelope,
// where decoding each took a dozen; what QuickCheck leaves (a diff of an
// op it does not know, here) is still decoded and checked.
func TestCheckBatchWithoutDecoding(t *testing.T) {
	var envs []json.RawMessage
	var quick, all int
	for _, it := range realItems(t, s1, 400) {
		if _, ok := protocol.QuickCheck(it.Body); ok {
			quick++
			if len(envs) < 100 {
				envs = append(envs, it.Body)
			}
		}
		all++
	}
	if quick < all*9/10 {
		t.Fatalf("%d of %d real envelopes are decided in one pass", quick, all)
	}
	f := protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envs}
	allocs := testing.AllocsPerRun(20, func() {
		if _, e := checkBatch(f); e != nil {
			t.Fatal(e.Message)
		}
	})
	t.Logf("%.0f allocations for a batch of %d envelopes", allocs, len(envs))
	if allocs > float64(2*len(envs)) {
		t.Fatalf("%.0f allocations to check %d envelopes", allocs, len(envs))
	}
	// Left to the full decoding: a diff's bound is still checked.
	bad := json.RawMessage(`{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"path":"a","op":"delete","hunks":[]}}}`)
	if _, e := checkBatch(protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: []json.RawMessage{envs[0], bad}}); e == nil || e.Code != "bad-envelope" {
		t.Fatalf("a diff of op delete: %+v", e)
	}
}

// Checking a batch without blobs allocates little beyond its items: no
// decoded envelope is kept for blobs that are not there.
func TestCheckBatchAllocatesLittle(t *testing.T) {
	items := realItems(t, s1, 100)
	f := protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameEnvelopes, Session: s1}
	for _, it := range items {
		f.Envelopes = append(f.Envelopes, json.RawMessage(it.Body))
	}
	if _, e := checkBatch(f); e != nil {
		t.Fatalf("checkBatch: %+v", e)
	}
	const runs = 200
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range runs {
		checkBatch(f)
	}
	runtime.ReadMemStats(&m1)
	per := (m1.TotalAlloc - m0.TotalAlloc) / runs / uint64(len(items))
	t.Logf("%d bytes allocated an envelope", per)
	if per > 200 {
		t.Errorf("checking a batch allocated %d bytes an envelope, want at most 200", per)
	}
}
