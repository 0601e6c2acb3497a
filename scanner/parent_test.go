package scanner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
)

// chainLine is a main-transcript line of the given type with its parent
// ("" null).
func chainLine(typ, uuid, parent string) string {
	p := "null"
	if parent != "" {
		p = fmt.Sprintf("%q", parent)
	}
	switch typ {
	case "user":
		return fmt.Sprintf(`{"parentUuid":%s,"type":"user","message":{"role":"user","content":"prompt %s"},"uuid":%q}`+"\n", p, uuid, uuid)
	case "assistant":
		return fmt.Sprintf(`{"parentUuid":%s,"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"answer %s"}]},"uuid":%q}`+"\n", p, uuid, uuid)
	case "turn_duration":
		return fmt.Sprintf(`{"parentUuid":%s,"type":"system","subtype":"turn_duration","durationMs":44,"uuid":%q}`+"\n", p, uuid)
	case "attachment":
		return fmt.Sprintf(`{"parentUuid":%s,"isSidechain":false,"attachment":{"type":"date","uuid":"nested"},"type":"attachment","uuid":%q,"timestamp":"2026-01-01T10:00:00Z"}`+"\n", p, uuid)
	case "progress":
		return fmt.Sprintf(`{"parentUuid":%s,"type":"progress","data":{"message":{"uuid":"nested-%s"}},"toolUseID":"t","uuid":%q,"timestamp":"2026-01-01T10:00:00Z"}`+"\n", p, uuid, uuid)
	}
	panic("chainLine: " + typ)
}

// frozenClock is a Config.Now that moves only when told.
type frozenClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *frozenClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *frozenClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// passes waits for n passes of the scanner after the call.
func passes(t *testing.T, sc *Scanner, n int) {
	t.Helper()
	select { // a token of a pass before the call
	case <-sc.Synced():
	default:
	}
	for range n {
		select {
		case <-sc.Synced():
		case <-time.After(10 * time.Second):
			t.Fatal("no pass of the scanner")
		}
	}
}

// The main chain is delivered in parent order: a record whose parent is
// not written yet (Claude Code 2.1.197 answering fast writes the answer
// and turn_duration before the prompt) waits for it, at most
// ParentWindow (a frozen clock here: only the bound or the parent
// releases it) and claude.MaxHeld records; a user record never waits.
func TestScannerParentOrder(t *testing.T) {
	type step struct {
		lines []string
		want  string // delivered so far, after the append and a few passes
	}
	many := []string{chainLine("assistant", "a1", "missing")}
	for i := 2; i <= claude.MaxHeld; i++ {
		many = append(many, chainLine("assistant", fmt.Sprintf("a%d", i), fmt.Sprintf("a%d", i-1)))
	}
	chain := "a1"
	for i := 2; i <= claude.MaxHeld; i++ {
		chain += fmt.Sprintf(",a%d", i)
	}
	cases := []struct {
		name  string
		steps []step
		// expire: the clock passes ParentWindow after the steps.
		expire bool
		want   string
	}{
		{name: "prompt written after its answer, in one write",
			steps: []step{{lines: []string{chainLine("assistant", "A", "U"), chainLine("turn_duration", "TD", "A"), chainLine("user", "U", "")}}},
			want:  "U,A,TD"},
		{name: "prompt written after its answer, read in a later pass",
			steps: []step{
				{lines: []string{chainLine("user", "U0", ""), chainLine("assistant", "A0", "U0"), chainLine("turn_duration", "TD0", "A0"),
					chainLine("assistant", "A", "U"), chainLine("turn_duration", "TD", "A")}, want: "U0,A0,TD0"},
				{lines: []string{chainLine("user", "U", "TD0")}},
			},
			want: "U0,A0,TD0,U,A,TD"},
		{name: "through attachments written after the answer",
			steps: []step{
				{lines: []string{chainLine("assistant", "A", "X"), chainLine("turn_duration", "TD", "A")}, want: ""},
				{lines: []string{chainLine("user", "U", ""), chainLine("attachment", "X", "U")}},
			},
			want: "U,A,TD"},
		{name: "a chain through attachments and progress does not wait",
			steps: []step{{lines: []string{chainLine("user", "U", ""), chainLine("attachment", "X", "U"), chainLine("progress", "P", "X"),
				chainLine("assistant", "A", "P"), chainLine("assistant", "B", "U"), chainLine("turn_duration", "TD", "A")}, want: "U,A,B,TD"}},
			want: "U,A,B,TD"},
		{name: "parent never written: released after the window, in file order",
			steps:  []step{{lines: []string{chainLine("assistant", "A", "gone"), chainLine("turn_duration", "TD", "A")}, want: ""}},
			expire: true,
			want:   "A,TD"},
		{name: "resumed: the first record names a record of another file",
			steps: []step{{lines: []string{chainLine("user", "U", "older-file"), chainLine("assistant", "A", "U")}, want: "U,A"}},
			want:  "U,A"},
		{name: "held limit",
			steps: []step{
				{lines: many[:len(many)-1], want: ""},
				{lines: many[len(many)-1:], want: chain},
			},
			want: chain},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			main := filepath.Join(dir, "s1.jsonl")
			clock := &frozenClock{t: time.Now()}
			h := start(t, dir, Config{Now: clock.now})
			h.sc.AddSession("s1")
			for i, s := range c.steps {
				appendTo(t, main, strings.Join(s.lines, ""))
				if i < len(c.steps)-1 || s.want != "" || c.expire {
					passes(t, h.sc, 3)
					if got := strings.Join(h.sink.uuids(false), ","); got != s.want {
						t.Fatalf("after step %d delivered %q, want %q", i, got, s.want)
					}
				}
			}
			if c.expire {
				clock.add(DefaultParentWindow)
			}
			waitFor(t, c.want, func() bool { return strings.Join(h.sink.uuids(false), ",") == c.want })
		})
	}
}

// A record held for its parent stays before the cursor: ccrelay killed
// while it is held (the cursor as it saved it then) reads it again as new
// (not replayed) at the next start, and its parent, written meanwhile,
// goes before it. (A scanner that stops passes it on: its last pass waits
// for nothing.)
func TestScannerParentHeldAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	cursor := filepath.Join(t.TempDir(), "cursor.json")
	main := filepath.Join(dir, "s1.jsonl")
	clock := &frozenClock{t: time.Now()}
	h := start(t, dir, Config{CursorFile: cursor, Now: clock.now})
	h.sc.AddSession("s1")
	appendTo(t, main, chainLine("user", "U0", "")+chainLine("assistant", "A0", "U0")+chainLine("assistant", "A", "U")+chainLine("turn_duration", "TD", "A"))
	waitFor(t, "U0,A0", func() bool { return strings.Join(h.sink.uuids(false), ",") == "U0,A0" })
	passes(t, h.sc, 2)
	if got := strings.Join(h.sink.uuids(false), ","); got != "U0,A0" {
		t.Fatalf("delivered %s while A waited for its parent", got)
	}
	killed := filepath.Join(t.TempDir(), "cursor.json")
	b, err := os.ReadFile(cursor)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(killed, b, 0o600); err != nil {
		t.Fatal(err)
	}
	h.stop()
	if got := strings.Join(h.sink.uuids(false), ","); got != "U0,A0,A,TD" {
		t.Fatalf("a stopping scanner delivered %s, want U0,A0,A,TD", got)
	}
	appendTo(t, main, chainLine("user", "U", "A0"))
	h2 := start(t, dir, Config{CursorFile: killed, Now: clock.now})
	h2.sc.AddSession("s1")
	waitFor(t, "U,A,TD", func() bool { return strings.Join(h2.sink.uuids(false), ",") == "U,A,TD" })
	if got := strings.Join(h2.sink.uuids(true), ","); got != "U0,A0" {
		t.Fatalf("replayed %s, want U0,A0", got)
	}
}

// Flush (Claude stopped) waits for no parent: what it read goes, in
// parent order where the parent was read, else in file order.
func TestScannerParentFlush(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "s1.jsonl")
	clock := &frozenClock{t: time.Now()}
	h := start(t, dir, Config{Now: clock.now})
	h.sc.AddSession("s1")
	appendTo(t, main, chainLine("assistant", "A", "gone")+chainLine("turn_duration", "TD", "A"))
	passes(t, h.sc, 2)
	if got := h.sink.uuids(false); len(got) != 0 {
		t.Fatalf("delivered %v while A waited", got)
	}
	flush(t, h.sc)
	if got := strings.Join(h.sink.uuids(false), ","); got != "A,TD" {
		t.Fatalf("after Flush %s, want A,TD", got)
	}
}
