package replay

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
)

func TestChatRendering(t *testing.T) {
	res := "line1\nline2\nline3\nline4\nline5\nline6"
	envs := []protocol.Envelope{
		{Role: protocol.RoleUser, Ev: protocol.Event{T: protocol.KindText, Text: "list files"}},
		{Role: protocol.RoleAgent, Turn: "t", Time: 1795373975149, Ev: protocol.Event{T: protocol.KindTurnStart}},
		{Role: protocol.RoleAgent, Turn: "t", Ev: protocol.Event{T: protocol.KindText, Text: "pondering", Thinking: true}},
		{Role: protocol.RoleAgent, Turn: "t", Ev: protocol.Event{T: protocol.KindToolCallStart, Call: "c1", Name: "Bash", Title: "Bash call", Description: "Bash call", Args: []byte(`{"command":"ls -la"}`)}},
		{Role: protocol.RoleAgent, Turn: "t", Ev: protocol.Event{T: protocol.KindToolCallEnd, Call: "c1", Result: &res}},
		{Role: protocol.RoleAgent, Turn: "t", Subagent: "cs", Ev: protocol.Event{T: protocol.KindStart, Title: "Helper"}},
		{Role: protocol.RoleAgent, Turn: "t", Subagent: "cs", Ev: protocol.Event{T: protocol.KindText, Text: "sub says"}},
		{Role: protocol.RoleAgent, Turn: "t", Subagent: "cs", Ev: protocol.Event{T: protocol.KindToolCallEnd, Call: "c2", Error: true, Result: &res}},
		{Role: protocol.RoleAgent, Turn: "t", Subagent: "cs", Ev: protocol.Event{T: protocol.KindStop}},
		{Role: protocol.RoleAgent, Turn: "t", Ev: protocol.Event{T: protocol.KindTurnEnd, Status: protocol.StatusCancelled}},
	}
	var plain, color bytes.Buffer
	cp, cc := NewChat(&plain, false), NewChat(&color, true)
	for i := range envs {
		if err := cp.Write(&envs[i]); err != nil {
			t.Fatal(err)
		}
		_ = cc.Write(&envs[i])
	}
	got := plain.String()
	for _, want := range []string{
		"› list files", "── turn 1 · 2026-11-22 18:59:35Z", "✻ pondering", "⚙ Bash ls -la",
		"⎿ line1\n  line2\n  line3\n  line4\n  … 2 more lines", "┌ Agent: Helper", "│ ⏺ sub says",
		"│ ⎿ (c2) line1", "└ Helper done", "⊘ cancelled",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("chat lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\x1b") {
		t.Error("escape codes without color")
	}
	if !strings.Contains(color.String(), ansiRed) || !strings.Contains(color.String(), ansiDim+ansiItalic+"✻ pondering") {
		t.Errorf("color output lacks error red or dim thinking:\n%q", color.String())
	}
	if err := cp.Finish(); err != nil || strings.Contains(plain.String(), "still open") {
		t.Fatal("closed turn reported open")
	}
}
