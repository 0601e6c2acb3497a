package launcher

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

// sameEnvelopes reports the first difference between live and replay's
// envelopes.
func sameEnvelopes(t *testing.T, live, want []protocol.Envelope) {
	t.Helper()
	if len(live) != len(want) {
		t.Errorf("live %d envelopes, replay %d", len(live), len(want))
	}
	for i := range min(len(live), len(want)) {
		a, _ := json.Marshal(live[i])
		b, _ := json.Marshal(want[i])
		if string(a) != string(b) {
			t.Errorf("envelope %d:\nlive   %s\nreplay %s", i, a, b)
			return
		}
	}
}

// followCodex runs a follower into a pipeline of mapper.Codex until the
// test ends.
func followCodex(t *testing.T, out Outbox) (*CodexPipeline, *scanner.CodexFollower) {
	t.Helper()
	pipe := NewCodexPipeline(out, func(thread string) CodexMapper { return mapper.NewCodex(thread) })
	fol := scanner.NewCodexFollower(scanner.CodexConfig{PollInterval: 100 * time.Millisecond, NoWatch: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, pipe)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fol.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		<-done
	})
	return pipe, fol
}

// A subagent's thread, followed live as Codex writes the two rollouts
// (the fixture of the real Codex 0.169.0's SUBAGENT scenario, its lines
// written in the order of their time, the follower reading after every
// line, or after all of them), maps into its parent's session as replay
// maps it: the same envelopes in the same order. Only the parent's
// rollout is followed; the subagent's is found beside it.
func TestCodexLiveSubagentEqualsReplay(t *testing.T) {
	const parentID, childID = "01a21dbb-e0d9-7522-8d58-c59df541000b", "01a21dbb-e24b-7ca3-aa69-cdca4f166101"
	fix := filepath.Join("..", "codex", "testdata", codex.TestedVersion)
	type line struct {
		file string
		ts   int64
		data string
	}
	read := func(src string) []string {
		f, err := os.Open(filepath.Join(fix, src))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var out []string
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			out = append(out, sc.Text()+"\n")
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		every int
		fail  bool // every other append fails at first
	}{{"each line", 1, false}, {"every 5 lines", 5, false}, {"at the end", 1000, false}, {"appends failing", 1, true}} {
		every := tc.every
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sessions", "2026", "11", "27")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			parent := filepath.Join(dir, "rollout-2026-11-27T15-59-41-"+parentID+".jsonl")
			child := filepath.Join(dir, "rollout-2026-11-27T15-59-42-"+childID+".jsonl")
			var all []line
			for _, f := range []struct{ src, dst string }{{"exec_subagent.jsonl", parent}, {"exec_subagent.2.jsonl", child}} {
				for _, l := range read(f.src) {
					r, err := codex.Parse([]byte(l))
					if err != nil {
						t.Fatal(err)
					}
					all = append(all, line{f.dst, r.Timestamp, l})
				}
			}
			slices.SortStableFunc(all, func(a, b line) int { return int(a.ts - b.ts) })
			out := &codexSessionsOutbox{failing: tc.fail}
			_, fol := followCodex(t, out)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for i, l := range all {
				f, err := os.OpenFile(l.file, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteString(l.data); err != nil {
					t.Fatal(err)
				}
				f.Close()
				if i == 0 {
					fol.Follow(parent)
				}
				if (i+1)%every == 0 {
					if err := fol.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := fol.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			live := out.Envelopes()
			want := replayFiles(t, parent)
			subs := 0
			for _, e := range want {
				if e.Subagent != "" {
					subs++
				}
			}
			if subs == 0 {
				t.Fatal("replay has no subagent envelope")
			}
			sameEnvelopes(t, live, want)
			if got := out.sessions(); len(got) != 1 || got[0] != parentID {
				t.Errorf("sessions %v, want the parent's alone", got)
			}
		})
	}
}

// codexSessionsOutbox is a MemOutbox that notes the sessions appended to.
type codexSessionsOutbox struct {
	MemOutbox
	mu      sync.Mutex
	seen    []string
	failing bool // every other append fails
	n       int
}

func (o *codexSessionsOutbox) Append(ctx context.Context, s string, envs []protocol.Envelope) error {
	o.mu.Lock()
	if o.n++; o.failing && o.n%2 == 1 {
		o.mu.Unlock()
		return errors.New("disk full")
	}
	if !slices.Contains(o.seen, s) {
		o.seen = append(o.seen, s)
	}
	o.mu.Unlock()
	return o.MemOutbox.Append(ctx, s, envs)
}

func (o *codexSessionsOutbox) sessions() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.seen)
}

// Local mode does not report a subagent's thread as a thread of its own:
// the follower follows it with its parent, into the parent's session.
func TestCodexWatchLeavesSubagentsToTheirParent(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	var got []string
	w := newCodexWatch(home, cwd, nil, func(p string, _ *codex.SessionMeta) { got = append(got, filepath.Base(p)) },
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	w.snapshot()
	dir := filepath.Join(codex.SessionsDir(home), "d")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	const parent, child = "01a21dbb-e0d9-7522-8d58-c59df541000b", "01a21dbb-e24b-7ca3-aa69-cdca4f166101"
	write := func(id, meta string) string {
		p := filepath.Join(dir, "rollout-2026-11-27T15-59-41-"+id+".jsonl")
		if err := os.WriteFile(p, []byte(`{"ordinal":0,"type":"session_meta","payload":`+meta+"}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return filepath.Base(p)
	}
	want := write(parent, `{"id":"`+parent+`","cwd":"`+cwd+`","originator":"codex-tui"}`)
	write(child, `{"id":"`+child+`","parent_thread_id":"`+parent+`","cwd":"`+cwd+`","originator":"codex-tui"}`)
	w.scan()
	if len(got) != 1 || got[0] != want {
		t.Fatalf("reported %v, want the parent's alone (%s)", got, want)
	}
}
