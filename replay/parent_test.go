package replay

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/protocol"
)

// line is a main-transcript line of the given kind with its parent (""
// null), timestamped at second sec.
func line(kind, uuid, parent string, sec int) string {
	p := "null"
	if parent != "" {
		p = fmt.Sprintf("%q", parent)
	}
	ts := fmt.Sprintf("2026-01-01T10:00:%02d.000Z", sec%60)
	switch kind {
	case "user":
		return fmt.Sprintf(`{"parentUuid":%s,"isSidechain":false,"type":"user","message":{"role":"user","content":"prompt %s"},"uuid":%q,"timestamp":%q}`, p, uuid, uuid, ts)
	case "assistant":
		return fmt.Sprintf(`{"parentUuid":%s,"isSidechain":false,"message":{"id":"msg_%s","role":"assistant","content":[{"type":"text","text":"answer %s"}]},"type":"assistant","uuid":%q,"timestamp":%q}`, p, uuid, uuid, uuid, ts)
	case "turn_duration":
		return fmt.Sprintf(`{"parentUuid":%s,"isSidechain":false,"type":"system","subtype":"turn_duration","durationMs":44,"uuid":%q,"timestamp":%q}`, p, uuid, ts)
	case "attachment":
		return fmt.Sprintf(`{"parentUuid":%s,"isSidechain":false,"attachment":{"type":"date"},"type":"attachment","uuid":%q,"timestamp":%q}`, p, uuid, ts)
	}
	panic("line: " + kind)
}

// kinds describes envelopes: U(text) for the user's, the kind for the
// others (T(text) for text).
func kinds(envs []protocol.Envelope) string {
	var out []string
	for _, e := range envs {
		switch {
		case e.Role == protocol.RoleUser:
			out = append(out, "U("+e.Ev.Text+")")
		case e.Ev.T == protocol.KindText:
			out = append(out, "T("+e.Ev.Text+")")
		default:
			out = append(out, string(e.Ev.T))
		}
	}
	return strings.Join(out, " ")
}

// Replay maps the main chain in parent order, as the scanner delivers it
// live: Claude Code 2.1.197 answering fast writes the answer and its
// turn_duration before the prompt they answer, and the phone must show
// the prompt first. A parent that never comes (the end of the file, or
// claude.MaxHeld records on) leaves the order as written.
func TestReplayParentOrder(t *testing.T) {
	var long []string
	long = append(long, line("assistant", "a1", "gone", 1))
	for i := 2; i <= claude.MaxHeld; i++ {
		long = append(long, line("assistant", fmt.Sprintf("a%d", i), fmt.Sprintf("a%d", i-1), 1))
	}
	long = append(long, line("user", "gone", "", 2))
	cases := []struct {
		name  string
		lines []string
		want  string
	}{
		{"the prompt after its answer (2.1.197)",
			[]string{line("assistant", "A", "U", 1), line("turn_duration", "TD", "A", 1), line("user", "U", "", 0)},
			"U(prompt U) turn-start T(answer A) turn-end"},
		{"after an earlier turn",
			[]string{line("user", "U0", "", 0), line("assistant", "A0", "U0", 0), line("turn_duration", "TD0", "A0", 0),
				line("assistant", "A", "U", 2), line("turn_duration", "TD", "A", 2), line("user", "U", "TD0", 1)},
			"U(prompt U0) turn-start T(answer A0) turn-end U(prompt U) turn-start T(answer A) turn-end"},
		{"through an attachment written after the answer",
			[]string{line("assistant", "A", "X", 1), line("turn_duration", "TD", "A", 1), line("user", "U", "", 0), line("attachment", "X", "U", 0)},
			"U(prompt U) turn-start T(answer A) turn-end"},
		{"the parent never comes: file order",
			[]string{line("assistant", "A", "gone", 1), line("turn_duration", "TD", "A", 1), line("user", "U", "", 2)},
			"turn-start T(answer A) turn-end U(prompt U)"},
		{"resumed: the first record names a record of another file",
			[]string{line("user", "U", "older", 0), line("assistant", "A", "U", 1), line("turn_duration", "TD", "A", 1)},
			"U(prompt U) turn-start T(answer A) turn-end"},
		{"the parent after claude.MaxHeld records: file order", long, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.jsonl")
			if err := os.WriteFile(path, []byte(strings.Join(c.lines, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			got := kinds(replayFile(t, path).envs)
			want := c.want
			if want == "" { // the long case: the prompt last
				if !strings.HasPrefix(got, "turn-start T(answer a1) T(answer a2)") || !strings.HasSuffix(got, "U(prompt gone)") {
					t.Fatalf("got %s, want the answers in file order, then the prompt", got)
				}
				return
			}
			if got != want {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// A record whose parent is not read yet holds the lines read after it,
// conversation or not, and no more than claude.MaxHeldLines of them: a
// transcript whose orphan answer is followed by lines of other types
// (which do not count toward claude.MaxHeld) without end held every one
// of them, to the end of the file, in memory. Past the bound the record
// goes on in file order, so a parent written after it is not moved in
// front.
func TestReplayParentWaitBoundedByLines(t *testing.T) {
	lines := []string{line("assistant", "A", "U", 1)}
	for i := range claude.MaxHeldLines + 10 {
		lines = append(lines, line("attachment", fmt.Sprintf("x%d", i), "", 1))
	}
	lines = append(lines, line("user", "U", "", 2))
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := kinds(replayFile(t, path).envs), "turn-start T(answer A) turn-end U(prompt U)"; got != want {
		t.Fatalf("got  %s\nwant %s (the answer in file order: its parent came past the bound)", got, want)
	}
	// Within the bound the parent is still waited for.
	short := append([]string{line("assistant", "A", "U", 1)}, lines[1:100]...)
	short = append(short, line("user", "U", "", 2))
	if err := os.WriteFile(path, []byte(strings.Join(short, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := kinds(replayFile(t, path).envs), "U(prompt U) turn-start T(answer A)"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
