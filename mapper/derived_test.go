package mapper

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// The id sources taken from a subagent or task are remembered as a list
// of the last MaxDerived would remember them: derive gives what a
// reference that keeps that list gives, whatever the mix of keys given
// again, and the memory it keeps stays bounded.
func TestDeriveKeepsTheLast(t *testing.T) {
	m := New("s")
	var ref []string // the sources given, oldest first
	inRef := map[string]bool{}
	refDerive := func(key, fallback string) string {
		k := key
		for n := 1; inRef[k]; n++ {
			k = fallback
			if n > 1 {
				k = fallback + "#" + strconv.Itoa(n)
			}
		}
		ref = append(ref, k)
		inRef[k] = true
		if len(ref) > MaxDerived {
			delete(inRef, ref[0])
			ref = ref[1:]
		}
		return k
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const steps = 5*MaxDerived + 500
	for n := range steps {
		key := "notification:t" + strconv.Itoa(rng.IntN(2*MaxDerived))
		fallback := "rec" + strconv.Itoa(rng.IntN(8))
		if got, want := m.derive(key, fallback), refDerive(key, fallback); got != want {
			t.Fatalf("step %d: derive(%q, %q) = %q, want %q", n, key, fallback, got, want)
		}
		if len(m.derived) > MaxDerived {
			t.Fatalf("step %d: %d sources remembered, want at most %d", n, len(m.derived), MaxDerived)
		}
	}
	if q := len(m.derivedQ) - m.derivedHead; q > MaxDerived || cap(m.derivedQ) > 3*MaxDerived {
		t.Fatalf("the list of sources holds %d entries (capacity %d)", q, cap(m.derivedQ))
	}
}

// A long session of background tasks, each reported twice (a notification
// Claude writes again with a new uuid): every report of a task has ids of
// its own, past the bound as before it, and the mapper remembers at most
// MaxDerived sources.
func TestLongSessionDerivedBounded(t *testing.T) {
	m := New(testSession)
	seen := map[string]int{}
	const tasks = 2*MaxDerived + 300
	for i := range tasks {
		task := "task" + strconv.Itoa(i)
		for _, copy := range []string{"a", "b"} {
			line := `{"type":"user","uuid":"n` + strconv.Itoa(i) + copy + `","origin":{"kind":"task-notification"},"timestamp":"2026-01-01T00:00:05Z","message":{"role":"user","content":"<task-notification>\n<task-id>` + task + `</task-id>\n<status>completed</status>\n<summary>done</summary>\n</task-notification>"}}`
			envs := m.Map(rec(t, line))
			if len(envs) == 0 {
				t.Fatalf("task %d: no envelopes", i)
			}
			for _, e := range envs {
				if prev, dup := seen[e.ID]; dup {
					t.Fatalf("task %d (%s): envelope id %s repeats one of task %d", i, copy, e.ID, prev)
				}
				seen[e.ID] = i
			}
		}
		m.Close("completed")
		if len(m.derived) > MaxDerived {
			t.Fatalf("after %d tasks: %d sources remembered, want at most %d", i+1, len(m.derived), MaxDerived)
		}
	}
}
