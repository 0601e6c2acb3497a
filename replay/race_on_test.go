//go:build race

package replay

// raceEnabled: the race detector's shadow memory counts in a process's RSS.
const raceEnabled = true
