package testutil

import "regexp"

// controlSeqs matches a terminal's control sequences: CSI (parameters,
// intermediates, final byte, as ECMA-48 has them), OSC ended by BEL or by
// ST (ESC \), and a character set's designation (ESC ( B).
var controlSeqs = regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\a\x1b]*(\a|\x1b\\)|\x1b[()][0-9A-Za-z]`)

// TerminalText is what a program drew on a terminal, drawn, without the
// terminal's control sequences: its text, and nothing else taken out.
func TerminalText(drawn string) string {
	return controlSeqs.ReplaceAllString(drawn, "")
}
