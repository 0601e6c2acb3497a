package claude

import (
	"runtime"
	"strconv"
	"testing"
)

// A Dedupe remembers every key it was given, across the merges of its
// recent keys into the sorted list, and takes about 8 bytes per key: a
// replay of a gigabyte of transcript holds a few hundred thousand.
func TestDedupeRemembersCompactly(t *testing.T) {
	const n = 200000
	recs := make([]*Record, n)
	for i := range recs {
		recs[i] = &Record{Type: TypeUser, UUID: "u-" + strconv.Itoa(i)}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d := &Dedupe{}
	for i, r := range recs {
		if d.Seen(r) {
			t.Fatalf("record %d seen before it came", i)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perKey := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	t.Logf("%.1f bytes per key", perKey)
	for i := 0; i < n; i += 7 {
		if !d.Seen(recs[i]) || !d.Has(recs[i]) {
			t.Fatalf("record %d forgotten", i)
		}
	}
	if d.Has(&Record{Type: TypeUser, UUID: "u-new"}) {
		t.Fatal("a new record taken for a duplicate")
	}
	if d.Len() != n {
		t.Fatalf("Len %d, want %d", d.Len(), n)
	}
	if perKey > 16 {
		t.Fatalf("%.1f bytes per key, want at most 16", perKey)
	}
	runtime.KeepAlive(d)
}

// A Dedupe with a few keys is small: every session, however short, has
// one (the scanner keeps one per session it follows).
func TestDedupeSmallWhenFew(t *testing.T) {
	const n = 1000
	ds := make([]*Dedupe, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range ds {
		ds[i] = &Dedupe{}
		ds[i].Seen(&Record{Type: TypeUser, UUID: "u-" + strconv.Itoa(i)})
		ds[i].Seen(&Record{Type: TypeUser, UUID: "v-" + strconv.Itoa(i)})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	t.Logf("%.0f bytes per Dedupe of 2 keys", per)
	if per > 1024 {
		t.Fatalf("%.0f bytes per Dedupe of 2 keys, want at most 1 KB", per)
	}
	runtime.KeepAlive(ds)
}

// Seen hashes a record's keys without building them: a record seen before
// costs no allocation (an assistant record's second key hashed its content
// into a new string each time).
func TestDedupeSeenAllocatesNothing(t *testing.T) {
	recs := []*Record{
		{Type: TypeUser, UUID: "u-1"},
		{Type: TypeAssistant, UUID: "u-2", Message: &Message{ID: "msg_1", Content: Content{Raw: []byte(`[{"type":"text","text":"hi"}]`)}}},
		{Type: TypeSummary, LeafUUID: "u-1", Summary: "a summary"},
	}
	d := &Dedupe{}
	for _, r := range recs {
		if d.Seen(r) {
			t.Fatalf("%+v seen before it came", r)
		}
	}
	for _, r := range recs {
		if n := testing.AllocsPerRun(100, func() {
			if !d.Seen(r) || !d.Has(r) {
				t.Fatalf("%+v not seen again", r)
			}
		}); n != 0 {
			t.Errorf("%s record: %.0f allocations a Seen and Has, want none", r.Type, n)
		}
	}
}

// Keys that differ are told apart, however their parts split: a message
// id against the content after it, a uuid against a summary's key, the
// same message id with other content.
func TestDedupeKeysDistinct(t *testing.T) {
	msg := func(uuid, id, content string) *Record {
		return &Record{Type: TypeAssistant, UUID: uuid, Message: &Message{ID: id, Content: Content{Raw: []byte(content)}}}
	}
	d := &Dedupe{}
	for i, r := range []*Record{
		msg("", "ab", `"x"`),
		msg("", "a", `b"x"`),
		msg("", "ab", `"y"`),
		{Type: TypeUser, UUID: "summary: l: s"},
		{Type: TypeSummary, LeafUUID: "l", Summary: "s"},
		{Type: TypeSummary, LeafUUID: "l: s"},
	} {
		if d.Seen(r) {
			t.Fatalf("record %d taken for a duplicate: %+v", i, r)
		}
	}
	if !d.Seen(msg("u-new", "ab", `"x"`)) {
		t.Fatal("the same message under a new uuid was not caught")
	}
}
