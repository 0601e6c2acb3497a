//go:build race

package apiclient

// raceEnabled: the race detector slows the code several times over.
const raceEnabled = true
