package launcher

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/scanner"
)

// Remote mode holds the scanner's cursor of its session at the last record
// whose envelopes are in the outbox: a transcript record whose stream-json
// copy is still in memory (a tool call held back) is held (ErrHold), and
// passes once the copy is stored, or after RemoteHoldWindow if remote mode
// never prints it. Records that are not conversation records pass at once.
func TestRemoteWatermark(t *testing.T) {
	const sess = "88888888-2222-4333-8444-555555555555"
	ctx := context.Background()
	parse := func(line string) *claude.Record {
		r, err := claude.Parse([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	call := parse(`{"type":"assistant","uuid":"a1","sessionId":"` + sess + `","timestamp":"2026-01-01T00:00:01Z","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]}}`)
	other := parse(`{"type":"assistant","uuid":"a2","sessionId":"` + sess + `","timestamp":"2026-01-01T00:00:02Z","message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"never printed"}]}}`)
	meta := parse(`{"type":"file-history-snapshot","messageId":"x","snapshot":{}}`)
	out := &MemOutbox{}
	p := NewPipeline("", out)
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	p.SetRemote(sess, true)
	batch := func(recs ...*claude.Record) scanner.Batch {
		b := scanner.Batch{Session: sess}
		for _, r := range recs {
			b.Records = append(b.Records, scanner.Record{Record: r})
		}
		return b
	}
	if err := p.Deliver(ctx, batch(meta)); err != nil {
		t.Fatalf("a record that is not conversation: %v", err)
	}
	if err := p.Deliver(ctx, batch(call)); !errors.Is(err, scanner.ErrHold) {
		t.Fatalf("a call not yet stored from stream-json: %v, want ErrHold", err)
	}
	// Remote mode stores its copy: the scanner's passes.
	if err := p.MapRecords(ctx, sess, []*claude.Record{call}); err != nil {
		t.Fatal(err)
	}
	if err := p.Deliver(ctx, batch(call)); err != nil {
		t.Fatalf("a call stored from stream-json: %v", err)
	}
	// A record remote mode never prints: held, then passed after the window.
	if err := p.Deliver(ctx, batch(other)); !errors.Is(err, scanner.ErrHold) {
		t.Fatalf("%v, want ErrHold", err)
	}
	now = now.Add(RemoteHoldWindow - time.Millisecond)
	if err := p.Deliver(ctx, batch(other)); !errors.Is(err, scanner.ErrHold) {
		t.Fatalf("%v, want ErrHold within the window", err)
	}
	now = now.Add(time.Millisecond)
	if err := p.Deliver(ctx, batch(other)); err != nil {
		t.Fatalf("after the window: %v", err)
	}
	n := len(out.Envelopes())
	// A batch held when the session goes back to local mode is dropped
	// as remote mode's when the scanner delivers it again.
	if err := p.Deliver(ctx, batch(other)); !errors.Is(err, scanner.ErrHold) {
		t.Fatalf("%v, want ErrHold", err)
	}
	p.SetRemote(sess, false)
	b := batch(other)
	b.Retry = true
	if err := p.Deliver(ctx, b); err != nil {
		t.Fatal(err)
	}
	if len(out.Envelopes()) != n {
		t.Fatal("a held remote batch was mapped after the switch back")
	}
}
