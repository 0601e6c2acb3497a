// Package envtest holds test helpers shared by the packages that produce
// envelopes: a short notation for envelopes and the invariants every stream
// of envelopes must keep.
package envtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
)

// Describe renders an envelope in the short notation of reference-behavior
// §8: U(text), TS, TE(status), A(text), TCS(call,name,title), TCE(call),
// S(title), P, SVC(text); then [sub=…], [thinking], [usage], [err], [result=…].
func Describe(e protocol.Envelope) string {
	var s string
	switch e.Ev.T {
	case protocol.KindText:
		if e.Role == protocol.RoleUser {
			s = "U(" + e.Ev.Text + ")"
		} else {
			s = "A(" + e.Ev.Text + ")"
		}
	case protocol.KindTurnStart:
		s = "TS"
	case protocol.KindTurnEnd:
		s = "TE(" + string(e.Ev.Status) + ")"
	case protocol.KindToolCallStart:
		s = fmt.Sprintf("TCS(%s,%s,%s,%s)", e.Ev.Call, e.Ev.Name, e.Ev.Title, e.Ev.Args)
	case protocol.KindToolCallEnd:
		s = "TCE(" + e.Ev.Call + ")"
	case protocol.KindStart:
		s = "S(" + e.Ev.Title + ")"
	case protocol.KindStop:
		s = "P"
	case protocol.KindService:
		s = "SVC(" + e.Ev.Text + ")"
	default:
		s = string(e.Ev.T)
	}
	if e.Subagent != "" {
		s += "[sub=" + e.Subagent + "]"
	}
	if e.Ev.Thinking {
		s += "[thinking]"
	}
	if e.Usage != nil {
		s += "[usage]"
	}
	if e.Ev.Error {
		s += "[err]"
	}
	if e.Ev.Result != nil {
		s += "[result=" + *e.Ev.Result + "]"
	}
	if c := e.Ev.Command; c != nil {
		s += "[cmd=" + c.Name + "|" + c.Args + "]"
	}
	if a := e.Ev.APIError; a != nil {
		s += fmt.Sprintf("[api=%d,%s,retries=%d,retrying=%v]", a.Status, a.Message, a.Retries, a.Retrying)
	}
	if c := e.Ev.Compaction; c != nil {
		s += "[compaction=" + c.Trigger
		if c.PreTokens != nil {
			s += fmt.Sprintf(",pre=%d", *c.PreTokens)
		}
		if c.PostTokens != nil {
			s += fmt.Sprintf(",post=%d", *c.PostTokens)
		}
		s += "]"
	}
	if d := e.Ev.Diff; d != nil {
		s += fmt.Sprintf("[diff=%s,%s", d.Op, d.Path)
		for _, h := range d.Hunks {
			s += fmt.Sprintf(",@@-%d,%d+%d,%d:%d", h.OldStart, h.OldLines, h.NewStart, h.NewLines, len(h.Lines))
		}
		if d.Truncated {
			s += ",truncated"
		}
		s += "]"
	}
	return s
}

func DescribeAll(envs []protocol.Envelope) []string {
	out := make([]string, len(envs))
	for i, e := range envs {
		out[i] = Describe(e)
	}
	return out
}

// CheckInvariants asserts what must hold for any output: every envelope
// validates, agent envelopes carry a turn, nothing of a turn comes after its
// turn-end, ids are unique, and a tool call ends at most once.
func CheckInvariants(t testing.TB, envs []protocol.Envelope) {
	t.Helper()
	ended := map[string]bool{}
	ids := map[string]bool{}
	callEnded := map[string]bool{} // one end per tool call
	open := ""
	for i, e := range envs {
		if err := e.Validate(); err != nil {
			t.Fatalf("envelope %d %s invalid: %v", i, Describe(e), err)
		}
		if ids[e.ID] {
			t.Fatalf("envelope %d %s repeats id %s", i, Describe(e), e.ID)
		}
		ids[e.ID] = true
		if e.Role == protocol.RoleAgent && e.Turn == "" {
			t.Fatalf("agent envelope %d %s has no turn", i, Describe(e))
		}
		if e.Turn != "" && ended[e.Turn] {
			t.Fatalf("envelope %d %s comes after the turn-end of its turn", i, Describe(e))
		}
		switch e.Ev.T {
		case protocol.KindTurnStart:
			if open != "" {
				t.Fatalf("envelope %d: turn-start while turn %s is open", i, open)
			}
			open = e.Turn
		case protocol.KindTurnEnd:
			ended[e.Turn] = true
			open = ""
		case protocol.KindToolCallStart:
			// A transcript may use a tool id again: a call started again
			// may end again.
			delete(callEnded, e.Ev.Call)
			if e.Turn != "" && e.Turn != open {
				t.Fatalf("envelope %d %s is in turn %s but the open turn is %q", i, Describe(e), e.Turn, open)
			}
		case protocol.KindToolCallEnd:
			if callEnded[e.Ev.Call] {
				t.Fatalf("envelope %d %s: a second end of call %s", i, Describe(e), e.Ev.Call)
			}
			callEnded[e.Ev.Call] = true
			fallthrough
		default:
			if e.Turn != "" && e.Turn != open {
				t.Fatalf("envelope %d %s is in turn %s but the open turn is %q", i, Describe(e), e.Turn, open)
			}
		}
	}
}

// Eq fails the test unless got equals want.
func Eq(t testing.TB, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("output\n got: %s\nwant: %s", strings.Join(got, " "), strings.Join(want, " "))
	}
}
