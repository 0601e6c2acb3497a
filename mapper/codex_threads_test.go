package mapper

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
)

// A session of many subagent threads keeps the whole mapping state of the
// last MaxCodexThreads only (those in a turn aside), and maps exactly as
// a mapper that keeps every thread's: a thread that comes back for another
// turn long after (its state given up) gives the same envelopes, its title,
// its model change and its context window included.
func TestCodexThreadsBounded(t *testing.T) {
	for _, most := range []int{3, MaxCodexThreads} {
		t.Run(fmt.Sprint(most), func(t *testing.T) {
			threads := 2*most + 5
			thread := func(i int) string { return fmt.Sprintf("01a21dbb-e24b-7ca3-aa69-%012d", i) }
			turn := func(b *cx, i int, n int, model string) {
				id := fmt.Sprintf("k%d-%d", i, n)
				call := "c" + id
				b.started(id).add("turn_context", obj{"turn_id": id, "model": model}).
					prompt(id, "u"+id, "go "+id).shell(call, "ls").output(call, "a b").
					said(id, "m"+id, "done "+id).usage(10, 0, 3).complete(id)
			}
			type line struct {
				thread int
				b      *cx
			}
			var script []line
			for i := range threads {
				b := &cx{t: t}
				b.add("session_meta", obj{"id": thread(i), "parent_thread_id": cxThread, "agent_nickname": fmt.Sprint("K", i)})
				turn(b, i, 1, "m1")
				script = append(script, line{i, b})
			}
			for _, i := range []int{0, 1, threads - 1} { // back for another turn
				b := &cx{t: t}
				turn(b, i, 2, "m2")
				script = append(script, line{i, b})
			}

			got, ref := NewCodex(cxThread), NewCodex(cxThread)
			got.maxThreads, ref.maxThreads = most, 1<<30
			var out, want []protocol.Envelope
			for _, l := range script {
				for _, r := range l.b.lines {
					out = append(out, got.MapThread(thread(l.thread), r)...)
					want = append(want, ref.MapThread(thread(l.thread), r)...)
				}
				kept := 0
				for _, cs := range got.threads {
					if len(cs.mapper.endedSet) > 0 || len(cs.mapper.derived) > 0 {
						kept++
					}
				}
				if kept > most {
					t.Fatalf("after thread %d: the state of %d threads kept, want at most %d", l.thread, kept, most)
				}
			}
			if q := len(got.threadQ) - got.threadHead; q > most || cap(got.threadQ) > 3*most+8 {
				t.Fatalf("the list of threads holds %d (capacity %d)", q, cap(got.threadQ))
			}
			checkInvariants(t, out)
			a, _ := json.Marshal(out)
			b, _ := json.Marshal(want)
			if string(a) != string(b) {
				for i := range min(len(out), len(want)) {
					if x, y := describe(out[i]), describe(want[i]); x != y || out[i].ID != want[i].ID {
						t.Fatalf("envelope %d: %s (%s), want %s (%s)", i, x, out[i].ID, y, want[i].ID)
					}
				}
				t.Fatalf("%d envelopes, want %d (or a field differs)", len(out), len(want))
			}
			changed := 0
			for _, e := range out {
				if e.Ev.T == protocol.KindService && e.Ev.Text == "Model changed to m2" {
					changed++
				}
			}
			if changed != 3 {
				t.Fatalf("%d model changes said, want 3", changed)
			}
		})
	}
}
