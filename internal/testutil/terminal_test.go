package testutil

import "testing"

// TerminalText takes a terminal's control sequences out of what a program
// drew, and nothing else: an OSC ends at BEL or at ST (ESC \), which Codex
// 0.169.0 uses for its state (OSC 7501). An OSC ended by ST must not run on
// to the next BEL and take what was drawn in between with it (the banner of
// Codex's new chat, in the first case).
func TestTerminalText(t *testing.T) {
	for _, tc := range []struct{ name, drawn, want string }{
		{"OSC ended by ST, then by BEL",
			"\x1b]0;⠋ project\a\x1b]7501;state=working:app=codex\x1b\\\x1b[?2026h\x1b[?25l\x1b[2;3H\x1b[38;5;75;49m>_ \x1b[1m\x1b[39;49mOpenAI Codex\x1b[22m\x1b[2m (v0.169.0)\x1b[39m\x1b]0;project\a\x1b]7501;state=idle:app=codex\x1b\\",
			">_ OpenAI Codex (v0.169.0)"},
		{"OSC ended by ST alone", "a\x1b]7501;state=idle\x1b\\b", "ab"},
		{"OSC ended by BEL", "\x1b]0;title\ahello\x1b]0;x\a", "hello"},
		{"CSI", "\x1b[1mbold\x1b[22m \x1b[?25lthere", "bold there"},
		{"CSI with > and an intermediate", "\x1b[>4;1mkeys\x1b[2 qcursor\x1b[3~", "keyscursor"},
		{"character set", "\x1b(Bplain\x1b)0", "plain"},
		{"text only", "no sequences; [brackets] and ] too", "no sequences; [brackets] and ] too"},
		{"empty", "", ""},
	} {
		if got := TerminalText(tc.drawn); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
