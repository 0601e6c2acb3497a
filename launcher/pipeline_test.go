package launcher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

func batch(t *testing.T, replayed bool, lines ...string) scanner.Batch {
	b := scanner.Batch{Session: "s1"}
	for _, l := range lines {
		r, err := claude.Parse([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		b.Records = append(b.Records, scanner.Record{Record: r, Replayed: replayed})
	}
	return b
}

// Replayed records rebuild the mapper without being appended again; the
// file outbox stores an id once, also across a reopen.
func TestPipelineReplayAndOutboxDedupe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	u1 := `{"type":"user","uuid":"u1","message":{"content":"hi"}}`
	a1 := `{"type":"assistant","uuid":"a1","message":{"content":[{"type":"text","text":"x"}]}}`
	a2 := `{"type":"assistant","uuid":"a2","message":{"content":[{"type":"text","text":"y"}]}}`
	out, err := OpenFileOutbox(path)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPipeline("", out)
	if err := p.Deliver(context.Background(), batch(t, false, u1, a1)); err != nil {
		t.Fatal(err)
	}
	out.Close()

	// Restart: the same records come back as Replayed, then one more; the
	// crash window re-delivers a1 as new too.
	out2, err := OpenFileOutbox(path)
	if err != nil {
		t.Fatal(err)
	}
	p2 := NewPipeline("", out2)
	if err := p2.Deliver(context.Background(), batch(t, true, u1)); err != nil {
		t.Fatal(err)
	}
	if err := p2.Deliver(context.Background(), batch(t, false, a1, a2)); err != nil {
		t.Fatal(err)
	}
	if err := p2.Close(context.Background(), protocol.StatusCompleted, 1); err != nil {
		t.Fatal(err)
	}
	out2.Close()
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	// U, TS, A(x), A(y), TE: the rebuilt mapper knew the turn was open (no
	// second turn-start) and nothing is doubled.
	if len(lines) != 5 || strings.Count(string(data), `"turn-start"`) != 1 || !strings.Contains(lines[4], `"turn-end"`) {
		t.Fatalf("outbox:\n%s", data)
	}
}

type sessionOutbox struct {
	got map[string][]protocol.Envelope
}

func (o *sessionOutbox) Append(_ context.Context, session string, envs []protocol.Envelope) error {
	o.got[session] = append(o.got[session], envs...)
	return nil
}

// A /clear starts a new Claude session: its records are mapped in a session
// of their own (ids as replay of its file gives), and Close ends the open
// turns of both.
func TestPipelineFollowsSessions(t *testing.T) {
	out := &sessionOutbox{got: map[string][]protocol.Envelope{}}
	p := NewPipeline("", out)
	a1 := `{"type":"assistant","uuid":"a1","message":{"content":[{"type":"text","text":"x"}]}}`
	b1 := `{"type":"assistant","uuid":"b1","message":{"content":[{"type":"text","text":"y"}]}}`
	one := batch(t, false, a1)
	two := batch(t, false, b1)
	two.Session = "s2"
	if err := p.Deliver(context.Background(), one); err != nil {
		t.Fatal(err)
	}
	if err := p.Deliver(context.Background(), two); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(context.Background(), protocol.StatusCompleted, 5); err != nil {
		t.Fatal(err)
	}
	for session, uuid := range map[string]string{"s1": "a1", "s2": "b1"} {
		envs := out.got[session]
		if len(envs) != 3 || envs[1].ClaudeUUID != uuid || envs[2].Ev.T != protocol.KindTurnEnd {
			t.Fatalf("%s: %d envelopes %+v", session, len(envs), envs)
		}
		want := mapper.New(session).Map(mustParse(t, map[string]string{"s1": a1, "s2": b1}[session]))
		if envs[1].ID != want[1].ID {
			t.Fatalf("%s: id %s, a fresh mapper of the session gives %s", session, envs[1].ID, want[1].ID)
		}
	}
}

func mustParse(t *testing.T, line string) *claude.Record {
	r, err := claude.Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// failOnce refuses its first Append, then stores in a MemOutbox.
type failOnce struct {
	MemOutbox
	failed bool
}

func (f *failOnce) Append(ctx context.Context, session string, envs []protocol.Envelope) error {
	if !f.failed {
		f.failed = true
		return os.ErrPermission
	}
	return f.MemOutbox.Append(ctx, session, envs)
}

// A batch the outbox refused comes back from the scanner as a Retry: its
// envelopes are appended as first mapped, not mapped a second time (which
// would move the mapper's turn state twice).
func TestPipelineRetryMapsOnce(t *testing.T) {
	u1 := `{"type":"user","uuid":"u1","timestamp":"2026-01-01T10:00:00Z","message":{"content":"hi"}}`
	a1 := `{"type":"assistant","uuid":"a1","timestamp":"2026-01-01T10:00:01Z","message":{"content":[{"type":"text","text":"x"}]}}`
	u2 := `{"type":"user","uuid":"u2","timestamp":"2026-01-01T10:00:02Z","message":{"content":"again"}}`
	ids := func(envs []protocol.Envelope) string {
		var out []string
		for _, e := range envs {
			out = append(out, e.ID)
		}
		return strings.Join(out, ",")
	}
	var want MemOutbox
	ref := NewPipeline("", &want)
	ref.Deliver(context.Background(), batch(t, false, u1, a1))
	ref.Deliver(context.Background(), batch(t, false, u2))

	out := &failOnce{}
	p := NewPipeline("", out)
	if err := p.Deliver(context.Background(), batch(t, false, u1, a1)); err == nil {
		t.Fatal("the refused append was not reported")
	}
	retry := batch(t, false, u1, a1)
	retry.Retry = true
	if err := p.Deliver(context.Background(), retry); err != nil {
		t.Fatal(err)
	}
	if err := p.Deliver(context.Background(), batch(t, false, u2)); err != nil {
		t.Fatal(err)
	}
	if got := ids(out.Envelopes()); got != ids(want.Envelopes()) {
		t.Fatalf("after a retry:\n got %s\nwant %s", got, ids(want.Envelopes()))
	}
}

// A failed write to the file outbox does not count its envelopes as
// stored: the retry writes them.
func TestFileOutboxFailedWriteIsRetried(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	o, err := OpenFileOutbox(path)
	if err != nil {
		t.Fatal(err)
	}
	good := o.f
	ro, err := os.Open(path) // writes to it fail
	if err != nil {
		t.Fatal(err)
	}
	o.f = ro
	var mem MemOutbox
	NewPipeline("", &mem).Deliver(context.Background(), batch(t, false, `{"type":"user","uuid":"u1","message":{"content":"hi"}}`))
	env := mem.Envelopes()[0]
	if err := o.Append(context.Background(), "s1", []protocol.Envelope{env}); err == nil {
		t.Fatal("write to a read-only file succeeded")
	}
	ro.Close()
	o.f = good
	if err := o.Append(context.Background(), "s1", []protocol.Envelope{env}); err != nil {
		t.Fatal(err)
	}
	o.Close()
	data, _ := os.ReadFile(path)
	if strings.Count(string(data), `"`+env.ID+`"`) != 1 {
		t.Fatalf("outbox holds:\n%s", data)
	}
}

// What remote mode remembers of the records it mapped, to pass over them
// when the scanner reads them back, stays bounded however long the session
// runs (claude.DedupeWindow keys): a remote CLI keeps it for as long as it
// runs, and it grew with every record.
func TestPipelineStreamedKeysBounded(t *testing.T) {
	out, err := OpenFileOutbox(filepath.Join(t.TempDir(), "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	p := NewPipeline("", out)
	const session = "5e55a001-0000-4000-8000-000000000001"
	for i := 0; i < 3*claude.DedupeWindow; i += 1000 {
		recs := make([]*claude.Record, 1000)
		for k := range recs {
			recs[k] = &claude.Record{Type: claude.TypeSystem, Subtype: "informational", UUID: fmt.Sprintf("s-%d", i+k)}
		}
		if err := p.MapRecords(context.Background(), session, recs); err != nil {
			t.Fatal(err)
		}
	}
	p.mu.Lock()
	n := p.streamed[session].Len()
	p.mu.Unlock()
	if n > claude.DedupeWindow {
		t.Fatalf("%d record keys remembered after %d records, more than %d", n, 3*claude.DedupeWindow, claude.DedupeWindow)
	}
}
