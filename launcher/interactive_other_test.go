//go:build !unix

package launcher

// terminalScenarios are the scenarios of docs/compatibility.md that need a
// terminal: none without a Unix pseudo-terminal.
func terminalScenarios() []versionScenario { return nil }
