package claude

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// PeekTypeLink finds the uuid and parentUuid of lines that are not
// conversation, where Claude writes them (the uuid after a large value
// too), and not a nested object's.
func TestPeekTypeLink(t *testing.T) {
	big := strings.Repeat("x", 2*tailBytes)
	cases := []struct {
		name, line        string
		typ, uuid, parent string
		wantErr           bool
	}{
		{"attachment (2.1.330)", `{"parentUuid":"p1","isSidechain":false,"attachment":{"type":"date","uuid":"n"},"type":"attachment","uuid":"u1","timestamp":"t","cwd":"/x"}`,
			"attachment", "u1", "p1", false},
		{"progress: the uuid after a large value", `{"parentUuid":"p1","type":"progress","data":{"uuid":"nested","s":"` + big + `"},"toolUseID":"t","uuid":"u1","timestamp":"t"}`,
			"progress", "u1", "p1", false},
		{"the uuid far from the end", `{"parentUuid":"p1","type":"progress","uuid":"u1","data":{"uuid":"nested","s":"` + big + `"}}`,
			"progress", "u1", "p1", false},
		{"a nested uuid last", `{"parentUuid":"p1","type":"progress","uuid":"u1","data":{"a":1,"uuid":"nested"}}`,
			"progress", "u1", "p1", false},
		{"the uuid 300 bytes from the end", `{"parentUuid":"p1","attachment":{"uuid":"n"},"type":"attachment","uuid":"u1","cwd":"/` + strings.Repeat("d", 300) + `"}`,
			"attachment", "u1", "p1", false},
		{"the uuid right after the type, far from the end (2.1.330)", attachment2_1_330,
			"attachment", "u1", "p1", false},
		{"a uuid with an escape", `{"parentUuid":"p\u0031","type":"attachment","uuid":"u\u0031"}`, "attachment", "u1", "p1", false},
		{"a null parent", `{"parentUuid":null,"type":"attachment","uuid":"u1"}`, "attachment", "u1", "", false},
		{"no parentUuid: not in the chain", `{"type":"file-history-snapshot","messageId":"m","uuid":"u1"}`, "file-history-snapshot", "", "", false},
		{"conversation: parsed, not peeked", `{"parentUuid":"p1","type":"user","uuid":"u1"}`, "user", "", "", false},
		{"truncated", `{"parentUuid":"p1","type":"progress","uuid":"u1"`, "", "", "", true},
		{"a flaw before the uuid at the end: not looked at", `{"parentUuid":"p1","type":"progress","data":{"a" 1},"uuid":"u1"}`, "progress", "u1", "p1", false},
		{"a flaw after the type: the type, no link", `{"parentUuid":"p1","type":"progress","data":{"a" 1},"s":"` + big + `"}`, "progress", "", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			typ, uuid, parent, err := PeekTypeLink([]byte(c.line))
			if (err != nil) != c.wantErr {
				t.Fatalf("err %v", err)
			}
			if typ != c.typ || uuid != c.uuid || parent != c.parent {
				t.Fatalf("got %q %q %q, want %q %q %q", typ, uuid, parent, c.typ, c.uuid, c.parent)
			}
			if pt, perr := PeekType([]byte(c.line)); pt != typ || (perr != nil) != (err != nil) {
				t.Fatalf("PeekType gives %q %v, PeekTypeLink %q %v", pt, perr, typ, err)
			}
			r, ru, rp, perr := ParseLineLink([]byte(c.line))
			u, p := "", ""
			if ru != nil {
				u, p = jsonStr(ru), jsonStr(rp)
			}
			if (perr != nil) != (err != nil) || u != uuid || p != parent || (r != nil && r.Type != typ) {
				t.Fatalf("ParseLineLink gives %v %q %q %v, PeekTypeLink %q %q %q %v", r, u, p, perr, typ, uuid, parent, err)
			}
		})
	}
}

// attachment2_1_330 is an attachment as Claude Code 2.1.330 writes it: a
// large attachment before the type, the uuid right after the type, and
// more than tailBytes after the uuid.
var attachment2_1_330 = `{"parentUuid":"p1","isSidechain":false,"attachment":{"type":"file","uuid":"n","content":"` +
	strings.Repeat("a", 4*tailBytes) + `"},"type":"attachment","uuid":"u1","timestamp":"2026-11-27T10:00:00.000Z","cwd":"/` +
	strings.Repeat("d", 2*tailBytes) + `","sessionId":"s","version":"2.1.330","gitBranch":"main"}`

// ParseLineLink finds a 2.1.330 attachment's uuid where Claude writes it,
// right after the type, without reading the line again from its start
// and without making a string: the record is its only allocation.
func TestParseLineLinkAllocs(t *testing.T) {
	line := []byte(attachment2_1_330)
	var lp LineParser
	allocs := testing.AllocsPerRun(100, func() {
		r, u, p, err := lp.ParseLineLink(line)
		if err != nil || r.Type != "attachment" || string(u) != `"u1"` || string(p) != `"p1"` {
			t.Fatalf("got %v %q %q %v", r, u, p, err)
		}
	})
	// The record of a type that is not conversation is made once.
	if allocs > 0 {
		t.Fatalf("ParseLineLink of a 2.1.330 attachment: %v allocations, want none", allocs)
	}
	r1, err1 := lp.ParseLine(line)
	r2, _, _, err2 := lp.ParseLineLink([]byte(strings.Replace(attachment2_1_330, `"type":"attachment"`, `"type":"progress"`, 1)))
	if err1 != nil || err2 != nil || r1.Type != "attachment" || r2.Type != "progress" || r1.UUID != "" || r1.Message != nil || r1.Raw != nil {
		t.Fatalf("got %+v, %+v (%v, %v)", r1, r2, err1, err2)
	}
}

// Waits and Hoist: a record whose parent was not read waits; once read,
// the parent and the records between on its chain go in front of it.
func TestLineageHoist(t *testing.T) {
	rec := func(typ, uuid, parent string) *Record { return &Record{Type: typ, UUID: uuid, ParentUUID: parent} }
	var l Lineage
	l.Add("u0", "", true)
	a := rec(TypeAssistant, "a", "x")
	if !l.Waits(a) {
		t.Fatal("a record whose parent was not read does not wait")
	}
	if l.Waits(rec(TypeUser, "v", "elsewhere")) || l.Waits(rec(TypeAssistant, "b", "u0")) || l.Waits(&Record{Type: TypeAssistant, UUID: "s", ParentUUID: "x", IsSidechain: true}) {
		t.Fatal("a prompt, a record whose parent was read or a sidechain record waits")
	}
	held := l.Add("a", "x", true)
	d := rec(TypeSystem, "d", "a")
	l.Add("d", "a", true)
	s := []*Record{a, d}
	id := func(r *Record) *Record { return r }
	if Hoist(&l, s, held, id) {
		t.Fatal("complete before the parent was read")
	}
	u := rec(TypeUser, "u", "u0")
	l.Add("u", "u0", true)
	l.Add("x", "u", false) // an attachment
	s = append(s, u)
	if !Hoist(&l, s, held, id) {
		t.Fatal("not complete once the parent was read")
	}
	var got []string
	for _, r := range s {
		got = append(got, r.UUID)
	}
	if strings.Join(got, ",") != "u,a,d" {
		t.Fatalf("order %v, want u,a,d", got)
	}
	// A line added from its JSON values is the same line.
	var r Lineage
	r.AddRaw([]byte(`"att"`), []byte(`"u\u0030"`))
	if r.Waits(rec(TypeAssistant, "b", "att")) {
		t.Fatal("a record whose parent was added by AddRaw waits")
	}
	if n, e, ok := r.find(hashUUID("att")); !ok || n != 0 || e.parent != hashUUID("u0") {
		t.Fatalf("AddRaw gave %v %+v %v", n, e, ok)
	}
	// Past the window, a line is forgotten: its children wait.
	var w Lineage
	w.Add("old", "", true)
	for range LineageWindow {
		w.Add("", "", false)
	}
	if !w.Waits(rec(TypeAssistant, "b", "old")) {
		t.Fatal("a line past the window is still known")
	}
}

// A record whose parent is not remembered (an orphan: a transcript can
// hold any number of them) costs the same whatever the number of lines
// remembered: the parent is found through an index, not a walk over the
// last LineageWindow lines (13.6 µs a record with a full window, and a
// replay of 300,000 such records 9 times slower than of a chain). The
// check compares the best of several timings with a full window and with
// a window of 16 lines: the walk made the first about a thousand times
// the second, the index keeps them alike (a bound of 20 leaves room for a
// loaded machine).
func TestLineageOrphanCostFlat(t *testing.T) {
	filled := func(n int) *Lineage {
		l := &Lineage{}
		for i := range n {
			l.Add(fmt.Sprint("u", i), fmt.Sprint("u", i-1), true)
		}
		return l
	}
	orphans := make([]*Record, 2000)
	for i := range orphans {
		orphans[i] = &Record{Type: TypeAssistant, UUID: fmt.Sprint("o", i), ParentUUID: fmt.Sprint("gone", i)}
	}
	best := func(l *Lineage) time.Duration {
		b := time.Duration(math.MaxInt64)
		for range 7 {
			start := time.Now()
			for _, r := range orphans {
				if !l.Waits(r) {
					t.Fatal("an orphan's parent found")
				}
			}
			b = min(b, time.Since(start))
		}
		return max(b, time.Microsecond)
	}
	full, small := best(filled(LineageWindow)), best(filled(16))
	t.Logf("2,000 orphans: %v with %d lines remembered, %v with 16", full, LineageWindow, small)
	if full > 20*small {
		t.Errorf("an orphan costs %.0fx more with a full window than with 16 lines", float64(full)/float64(small))
	}
}

// The index finds the last line with a uuid, and forgets a line once
// LineageWindow lines came after it, unless a later line has its uuid.
func TestLineageIndexForgets(t *testing.T) {
	var l Lineage
	l.Add("dup", "", true)
	for i := range LineageWindow - 2 {
		l.Add(fmt.Sprint("u", i), "", true)
	}
	n := l.Add("dup", "", true) // the same uuid again, later
	if k, _, ok := l.find(hashUUID("dup")); !ok || k != n {
		t.Fatalf("find dup: %d %v, want the later line %d", k, ok, n)
	}
	l.Add("next", "", true) // the first dup's line is forgotten
	if k, _, ok := l.find(hashUUID("dup")); !ok || k != n {
		t.Fatalf("find dup after the first was forgotten: %d %v, want %d", k, ok, n)
	}
	for i := range LineageWindow {
		l.Add(fmt.Sprint("v", i), "", true)
	}
	if _, _, ok := l.find(hashUUID("dup")); ok {
		t.Fatal("a line LineageWindow lines back is still found")
	}
}
