package mapper

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// The calls that had their end are remembered as a list of the last
// MaxEndedCalls would remember them, with a call started again forgotten,
// whatever the mix of starts and ends (the list is kept without moving it
// at each end).
func TestEndedCallsKeepTheLast(t *testing.T) {
	m := New("s")
	var ref []string // the ended calls, oldest first
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 60000 {
		id := "toolu_" + strconv.Itoa(rng.IntN(6000))
		if rng.IntN(3) == 0 {
			m.started(id, "", false)
			ref = slices.DeleteFunc(ref, func(e string) bool { return e == id })
		} else {
			m.ended(id)
			if !slices.Contains(ref, id) {
				ref = append(ref, id)
				if len(ref) > MaxEndedCalls {
					ref = ref[1:]
				}
			}
		}
		if n%997 == 0 || n > 59000 {
			if len(m.endedSet) != len(ref) {
				t.Fatalf("step %d: %d ended calls remembered, want %d", n, len(m.endedSet), len(ref))
			}
			for _, id := range ref {
				if _, ok := m.endedSet[id]; !ok {
					t.Fatalf("step %d: %s forgotten", n, id)
				}
			}
		}
	}
	if q := len(m.endedQ) - m.endedHead; q > 3*MaxEndedCalls {
		t.Fatalf("the list of ends holds %d entries", q)
	}
}
