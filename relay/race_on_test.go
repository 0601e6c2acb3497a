//go:build race

package relay

// raceEnabled: the race detector is on; it enlarges goroutine stacks and
// allocations, so memory budgets measured under it get its overhead.
const raceEnabled = true
