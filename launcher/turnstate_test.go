package launcher

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

// ccrelay is killed mid-turn (and its Claude with it): the turn's start,
// text and tool call reached the outbox, the transcript has less. The next
// ccrelay ends that turn (failed, saying ccrelay stopped; its call ends
// once) before the next turn opens: never two open turns.
func TestRestartEndsTheOpenTurn(t *testing.T) {
	const sess = "99999999-2222-4333-8444-555555555555"
	parse := func(line string) *claude.Record {
		r, err := claude.Parse([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	p1 := parse(`{"type":"user","uuid":"p1","sessionId":"` + sess + `","message":{"role":"user","content":"run it"}}`)
	a1 := parse(`{"type":"assistant","uuid":"a1","sessionId":"` + sess + `","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"Running."}]}}`)
	a2 := parse(`{"type":"assistant","uuid":"a2","sessionId":"` + sess + `","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"sleep 60"}}]}}`)
	none := parse(`{"type":"assistant","uuid":"n1","sessionId":"` + sess + `","message":{"id":"x1","role":"assistant","model":"<synthetic>","content":[{"type":"text","text":"No response requested."}]}}`)
	p2 := parse(`{"type":"user","uuid":"p2","sessionId":"` + sess + `","message":{"role":"user","content":"again"}}`)
	a3 := parse(`{"type":"assistant","uuid":"a3","sessionId":"` + sess + `","message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"Back."}]}}`)
	tests := []struct {
		name    string
		written []*claude.Record // what Claude wrote to the transcript before it died
		after   []*claude.Record // what the next run's Claude prints and records
		want    []string
	}{
		{"nothing of the turn written", []*claude.Record{p1}, []*claude.Record{none, p2, a3},
			[]string{"U(run it)", "TS", "A(Running.)", "TCS(toolu_1 Bash)", `TCE(toolu_1 error "` + StoppedCut.Result + `")`, "S(" + StoppedCut.Note + ")", "TE(failed)",
				"U(again)", "TS", "A(Back.)"}},
		{"the text written, not the call", []*claude.Record{p1, a1}, []*claude.Record{p2, a3},
			[]string{"U(run it)", "TS", "A(Running.)", "TCS(toolu_1 Bash)", `TCE(toolu_1 error "` + StoppedCut.Result + `")`, "S(" + StoppedCut.Note + ")", "TE(failed)",
				"U(again)", "TS", "A(Back.)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "turns.json")
			out := &MemOutbox{}
			first := NewPipeline("", out)
			if err := first.KeepTurns(path, nil); err != nil {
				t.Fatal(err)
			}
			first.SetRemote(sess, true)
			if err := first.MapRecords(ctx, sess, []*claude.Record{p1, a1, a2}); err != nil {
				t.Fatal(err)
			}
			// Killed: nothing more of the first run. The next one rebuilds
			// the session from the transcript (what was sent already),
			// then remote mode goes on.
			next := NewPipeline("", out)
			if err := next.KeepTurns(path, nil); err != nil {
				t.Fatal(err)
			}
			b := scanner.Batch{Session: sess}
			for _, r := range tt.written {
				b.Records = append(b.Records, scanner.Record{Record: r, Replayed: true})
			}
			if err := next.Deliver(ctx, b); err != nil {
				t.Fatal(err)
			}
			next.SetRemote(sess, true)
			if err := next.MapRecords(ctx, sess, tt.after); err != nil {
				t.Fatal(err)
			}
			envs := out.Envelopes()
			envtest.CheckInvariants(t, envs)
			envtest.Eq(t, describeAll(envs), tt.want...)
			// The turn left open is ended once: a third run finds the
			// second's open turn, not the first's.
			turns, err := ReadTurns(path)
			if err != nil {
				t.Fatal(err)
			}
			if ot := turns[sess]; ot.Turn != envs[len(envs)-1].Turn || len(ot.Calls) != 0 {
				t.Fatalf("kept %+v, want the open turn %s", ot, envs[len(envs)-1].Turn)
			}
		})
	}
}

// Turns a run in another slot left open are kept in this run's file at
// once (their slot is removed when taken over), and ended like its own.
func TestAddOrphansKept(t *testing.T) {
	const sess = "99999999-2222-4333-8444-666666666666"
	dir := t.TempDir()
	other := filepath.Join(dir, "other.json")
	out := &MemOutbox{}
	first := NewPipeline("", out)
	if err := first.KeepTurns(other, nil); err != nil {
		t.Fatal(err)
	}
	call, err := claude.Parse([]byte(`{"type":"assistant","uuid":"a1","sessionId":"` + sess + `","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := first.MapRecords(context.Background(), sess, []*claude.Record{call}); err != nil {
		t.Fatal(err)
	}
	left, err := ReadTurns(other)
	if err != nil || left[sess].Turn == "" {
		t.Fatalf("the other run's open turn: %+v, %v", left, err)
	}
	mine := filepath.Join(dir, "mine.json")
	next := NewPipeline("", out)
	if err := next.KeepTurns(mine, nil); err != nil {
		t.Fatal(err)
	}
	next.AddOrphans(left)
	if kept, err := ReadTurns(mine); err != nil || !kept[sess].Equal(left[sess]) {
		t.Fatalf("kept %+v, %v; want %+v", kept, err, left)
	}
	if err := next.Close(context.Background(), protocol.StatusCompleted, 1); err != nil {
		t.Fatal(err)
	}
	envs := out.Envelopes()
	envtest.CheckInvariants(t, envs)
	envtest.Eq(t, describeAll(envs), "TS", "TCS(toolu_1 Bash)", `TCE(toolu_1 error "`+StoppedCut.Result+`")`, "S("+StoppedCut.Note+")", "TE(failed)")
	if kept, err := ReadTurns(mine); err != nil || len(kept) != 0 {
		t.Fatalf("kept %+v, %v after the end", kept, err)
	}
}

// A turns file is read only for session ids: a key that is no session id
// (a damaged or planted file) is dropped. Kept, it made every later Close
// fail (the outbox refuses it, and the sessions sorted after it were not
// ended) and its name reached the outbox's file paths.
func TestReadTurnsSessionIDsOnly(t *testing.T) {
	const sess = "99999999-2222-4333-8444-777777777777"
	dir := t.TempDir()
	turn := protocol.New()
	path := filepath.Join(dir, "turns.json")
	body := `{"` + sess + `":{"turn":"` + turn + `"},"../escaped":{"turn":"` + turn + `"},"a/b":{"turn":"` + turn + `"}}`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	turns, err := ReadTurns(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 1 || turns[sess].Turn != turn {
		t.Fatalf("read %+v, want only %s", turns, sess)
	}
	out, err := OpenSessionOutbox(filepath.Join(dir, "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	p := NewPipeline("", out)
	if err := p.KeepTurns(path, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(context.Background(), protocol.StatusCompleted, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "escaped.jsonl")); err == nil {
		t.Fatal("ending the turns file's turns wrote escaped.jsonl outside the outbox's folder")
	}
	if _, err := os.Stat(filepath.Join(dir, "sessions", sess+".jsonl")); err != nil {
		t.Fatalf("the session's turn was not ended: %v", err)
	}
}

// The open turn kept in turns.json can be ahead of the scanner's cursor:
// remote mode appends what stream-json prints while the scanner's batch
// is held (holdRemote), and local mode appends a batch before the scanner
// saves its cursor. ccrelay killed there, the next run gets those records
// again, not as Replayed, and then what Claude wrote after them. The turn
// they rebuild is the one the app has open: it goes on, nothing is cut,
// and the app's copy is replay of the transcript. Only a call the
// transcript never holds (Claude printed it and was killed before writing
// it) is cut, before the first record after what the app had.
func TestRestartRebuildsTheHeldTurn(t *testing.T) {
	const sess = "99999999-2222-4333-8444-777777777777"
	rec := func(line string) *claude.Record {
		t.Helper()
		r, err := claude.Parse([]byte(strings.ReplaceAll(line, "{{s}}", sess)))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	p0 := rec(`{"type":"user","uuid":"p0","sessionId":"{{s}}","timestamp":"2026-11-22T10:00:00.000Z","message":{"role":"user","content":"first"}}`)
	a0 := rec(`{"type":"assistant","uuid":"a0","sessionId":"{{s}}","timestamp":"2026-11-22T10:00:01.000Z","message":{"id":"m0","role":"assistant","content":[{"type":"text","text":"First."}]}}`)
	p1 := rec(`{"type":"user","uuid":"p1","sessionId":"{{s}}","timestamp":"2026-11-22T10:00:02.000Z","message":{"role":"user","content":"run it"}}`)
	a1 := rec(`{"type":"assistant","uuid":"a1","sessionId":"{{s}}","timestamp":"2026-11-22T10:00:03.000Z","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"Running."}]}}`)
	a2 := rec(`{"type":"assistant","uuid":"a2","sessionId":"{{s}}","timestamp":"2026-11-22T10:00:04.000Z","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]}}`)
	r1 := rec(`{"type":"user","uuid":"r1","sessionId":"{{s}}","timestamp":"2026-11-22T10:00:04.000Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ran"}]}}`)
	a3 := rec(`{"type":"assistant","uuid":"a3","sessionId":"{{s}}","timestamp":"2026-11-22T10:00:05.000Z","message":{"id":"m2","role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"Bash","input":{"command":"pwd"}}]}}`)
	p2 := rec(`{"type":"user","uuid":"p2","sessionId":"{{s}}","timestamp":"2026-11-22T10:01:00.000Z","message":{"role":"user","content":"again"}}`)
	a4 := rec(`{"type":"assistant","uuid":"a4","sessionId":"{{s}}","timestamp":"2026-11-22T10:01:01.000Z","message":{"id":"m3","role":"assistant","content":[{"type":"text","text":"Back."}]}}`)
	cut := []string{`TCE(toolu_2 error "` + StoppedCut.Result + `")`, "S(" + StoppedCut.Note + ")", "TE(failed)"}
	tests := []struct {
		name   string
		remote bool
		sent   []*claude.Record // mapped and appended by the first run
		passed int              // of the transcript, what the first run's scanner passed (its cursor)
		// transcript is what Claude wrote; the records from passed on
		// come again in the next run, then Claude's next prompt.
		transcript []*claude.Record
		want       []string // nil: replay of the transcript
	}{
		{"remote, held from the prompt at the call's result", true, []*claude.Record{p0, a0, p1, a1, a2}, 0,
			[]*claude.Record{p0, a0, p1, a1, a2, r1}, nil},
		{"remote, held from the turn before", true, []*claude.Record{p0, a0, p1, a1, a2}, 1,
			[]*claude.Record{p0, a0, p1, a1, a2, r1}, nil},
		{"remote, held mid-turn at the call's result", true, []*claude.Record{p0, a0, p1, a1, a2}, 4,
			[]*claude.Record{p0, a0, p1, a1, a2, r1}, nil},
		{"remote, the result sent, held at the next call", true, []*claude.Record{p0, a0, p1, a1, a2, r1}, 3,
			[]*claude.Record{p0, a0, p1, a1, a2, r1, a3}, nil},
		{"local, killed before the cursor was saved", false, []*claude.Record{p0, a0, p1, a1, a2}, 2,
			[]*claude.Record{p0, a0, p1, a1, a2, r1}, nil},
		{"remote, the last call never written", true, []*claude.Record{p0, a0, p1, a1, a2, r1, a3}, 2,
			[]*claude.Record{p0, a0, p1, a1, a2, r1},
			slices.Concat([]string{"U(first)", "TS", "A(First.)", "TE(completed)", "U(run it)", "TS", "A(Running.)", "TCS(toolu_1 Bash)", `TCE(toolu_1 "ran")`,
				"TCS(toolu_2 Bash)"}, cut, []string{"U(again)", "TS", "A(Back.)"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "turns.json")
			out := &MemOutbox{}
			first := NewPipeline("", out)
			if err := first.KeepTurns(path, nil); err != nil {
				t.Fatal(err)
			}
			if tt.remote {
				first.SetRemote(sess, true)
				if err := first.MapRecords(ctx, sess, tt.sent); err != nil {
					t.Fatal(err)
				}
			} else if err := first.Deliver(ctx, scanner.Batch{Session: sess, Records: records(tt.sent, 0)}); err != nil {
				t.Fatal(err)
			}
			// Killed. The next run's scanner rebuilds what its cursor
			// passed, delivers the rest again, then the next prompt.
			next := NewPipeline("", out)
			if err := next.KeepTurns(path, nil); err != nil {
				t.Fatal(err)
			}
			all := append(slices.Clone(tt.transcript), p2, a4)
			if err := next.Deliver(ctx, scanner.Batch{Session: sess, Records: records(tt.transcript, tt.passed)}); err != nil {
				t.Fatal(err)
			}
			if err := next.Deliver(ctx, scanner.Batch{Session: sess, Records: records([]*claude.Record{p2, a4}, 0)}); err != nil {
				t.Fatal(err)
			}
			got := uniqueIDs(out.Envelopes())
			envtest.CheckInvariants(t, got)
			want := tt.want
			if want == nil {
				m := mapper.New(sess)
				var replay []protocol.Envelope
				for _, r := range all {
					replay = append(replay, m.Map(r)...)
				}
				want = describeAll(replay)
				if g, w := envIDs(got), envIDs(replay); g != w {
					t.Errorf("ids\n got %s\nwant %s", g, w)
				}
			}
			envtest.Eq(t, describeAll(got), want...)
		})
	}
}

// records are recs as the scanner delivers them, the first passed of them
// Replayed (before its durable cursor).
func records(recs []*claude.Record, passed int) []scanner.Record {
	out := make([]scanner.Record, len(recs))
	for i, r := range recs {
		out[i] = scanner.Record{Record: r, Replayed: i < passed}
	}
	return out
}

// uniqueIDs is envs with each id once, as the relay stores them.
func uniqueIDs(envs []protocol.Envelope) []protocol.Envelope {
	seen := map[string]bool{}
	var out []protocol.Envelope
	for _, e := range envs {
		if !seen[e.ID] {
			seen[e.ID] = true
			out = append(out, e)
		}
	}
	return out
}
