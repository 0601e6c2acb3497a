// Package crashmatrix holds the crash matrix: the real Claude Code under
// ccrelay, with Claude, ccrelay or the daemon killed at each phase of a
// turn, and what the app sees afterwards checked against the transcript.
// Its tests build the ccrelay binary once and run beside cmd/ccrelay's.
package crashmatrix
