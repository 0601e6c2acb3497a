package relay

import (
	"encoding/json"
	"reflect"
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
		if _, e := checkBatch(f, nil); e != nil {
			t.Fatal(e.Message)
		}
	})
	t.Logf("%.0f allocations for a batch of %d envelopes", allocs, len(envs))
	if allocs > float64(2*len(envs)) {
		t.Fatalf("%.0f allocations to check %d envelopes", allocs, len(envs))
	}
	// Left to the full decoding: a diff's bound is still checked.
	bad := json.RawMessage(`{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"path":"a","op":"delete","hunks":[]}}}`)
	if _, e := checkBatch(protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: []json.RawMessage{envs[0], bad}}, nil); e == nil || e.Code != "bad-envelope" {
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
	if _, e := checkBatch(f, nil); e != nil {
		t.Fatalf("checkBatch: %+v", e)
	}
	const runs = 200
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range runs {
		checkBatch(f, nil)
	}
	runtime.ReadMemStats(&m1)
	per := (m1.TotalAlloc - m0.TotalAlloc) / runs / uint64(len(items))
	t.Logf("%d bytes allocated an envelope", per)
	if per > 200 {
		t.Errorf("checking a batch allocated %d bytes an envelope, want at most 200", per)
	}
}

// A CLI's batch is checked in the pass that reads its frame
// (protocol.QuickBatch): checkBatch takes what that pass decided and scans
// no envelope again (not one allocation an envelope, where QuickCheck
// makes each id anew), with the same items; what the pass left (a diff of
// an op it does not know) is still decoded and refused.
func TestCheckBatchTakesTheReadPass(t *testing.T) {
	items := realItems(t, s1, 100)
	envs := make([]json.RawMessage, len(items))
	for i, it := range items {
		envs[i] = it.Body
	}
	data, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envs})
	f, ids, err := decodeFrame(data)
	if err != nil || len(ids) != len(envs) {
		t.Fatalf("decodeFrame: %d ids for %d envelopes, %v", len(ids), len(envs), err)
	}
	decided := 0
	for _, id := range ids {
		if id != "" {
			decided++
		}
	}
	if decided < len(ids)*9/10 {
		t.Fatalf("the read pass decided %d of %d envelopes", decided, len(ids))
	}
	got, e := checkBatch(*f, ids)
	want, we := checkBatch(*f, nil)
	if e != nil || we != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("checkBatch with the read pass's ids: %+v, %v; without: %+v, %v", got, e, want, we)
	}
	for i, it := range got {
		if it.ID != items[i].ID || string(it.Body) != string(items[i].Body) {
			t.Fatalf("item %d: %s, want %s", i, it.ID, items[i].ID)
		}
	}
	with := testing.AllocsPerRun(20, func() { checkBatch(*f, ids) })
	without := testing.AllocsPerRun(20, func() { checkBatch(*f, nil) })
	t.Logf("%.0f allocations with the read pass's ids, %.0f without; %d of %d envelopes decided in the pass", with, without, decided, len(envs))
	if without-with < float64(decided)*9/10 {
		t.Errorf("checking a batch read in one pass: %.0f allocations for %d envelopes, %.0f without the pass's ids: the envelopes the pass decided were scanned again", with, len(envs), without)
	}
	bad := json.RawMessage(`{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"path":"a","op":"delete","hunks":[]}}}`)
	data, _ = json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameEnvelopes, Session: s1, Envelopes: []json.RawMessage{envs[0], envs[1], envs[2], bad}})
	f, ids, err = decodeFrame(data)
	if err != nil || len(ids) != 4 || ids[0] == "" || ids[3] != "" {
		t.Fatalf("decodeFrame of a batch with a bad diff: ids %q, %v", ids, err)
	}
	if _, e := checkBatch(*f, ids); e == nil || e.Code != "bad-envelope" {
		t.Fatalf("a diff of op delete: %+v", e)
	}
}
