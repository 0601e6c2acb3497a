package main

import (
	"strings"
	"testing"
)

// csi takes a terminal's control sequences out of what a program drew, and
// nothing else: an OSC ends at BEL or at ST (ESC \), which Codex 0.169.0
// uses for its state (OSC 7501). Before, an OSC ended by ST ran on to the
// next BEL and took what was drawn in between with it: the banner of
// Codex's new chat, in this frame TestRealCodexLocal waited for in vain.
func TestCSIKeepsWhatIsDrawn(t *testing.T) {
	for _, tc := range []struct{ name, drawn, want string }{
		{"OSC ended by ST, then by BEL",
			"\x1b]0;⠋ project\a\x1b]7501;state=working:app=codex\x1b\\\x1b[?2026h\x1b[?25l\x1b[2;3H\x1b[38;5;75;49m>_ \x1b[1m\x1b[39;49mOpenAI Codex\x1b[22m\x1b[2m (v0.169.0)\x1b[39m\x1b]0;project\a\x1b]7501;state=idle:app=codex\x1b\\",
			">_OpenAICodex(v0.169.0)"},
		{"OSC ended by BEL", "\x1b]0;title\ahello\x1b]0;x\a", "hello"},
		{"CSI", "\x1b[1mbold\x1b[22m \x1b[?25lthere", "boldthere"},
	} {
		if got := strings.ReplaceAll(csi.ReplaceAllString(tc.drawn, ""), " ", ""); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
