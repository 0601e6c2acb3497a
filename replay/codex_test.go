package replay

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
)

// codexRollouts are the Codex rollouts the mapper's goldens cover.
func codexRollouts(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, dir := range []string{"samples", codex.TestedVersion} {
		m, _ := filepath.Glob(filepath.Join("..", "codex", "testdata", dir, "*.jsonl"))
		for _, f := range m {
			if !strings.HasSuffix(f, ".rpc.jsonl") {
				files = append(files, f)
			}
		}
	}
	if len(files) == 0 {
		t.Fatal("no Codex rollouts")
	}
	return files
}

// TestReplayCodex: `ccrelay replay` of a Codex rollout finds it is one (its
// first line is a session_meta), takes the thread id for the session, and
// writes the envelopes the mapper's golden file holds for it.
func TestReplayCodex(t *testing.T) {
	for _, f := range codexRollouts(t) {
		name := filepath.Base(filepath.Dir(f)) + "_" + strings.TrimSuffix(filepath.Base(f), ".jsonl")
		t.Run(name, func(t *testing.T) {
			s, err := FindSession([]string{f})
			if err != nil {
				t.Fatal(err)
			}
			id, _ := codex.ThreadID(f)
			first, _ := os.ReadFile(f)
			r, err := codex.Parse(bytes.SplitN(first, []byte("\n"), 2)[0])
			if err != nil {
				t.Fatal(err)
			}
			if !s.Codex || s.ID != r.SessionMeta.ID || (id != "" && id != s.ID) {
				t.Fatalf("session %+v, want the Codex thread %s", s, r.SessionMeta.ID)
			}
			var out bytes.Buffer
			st, err := Run(context.Background(), s, Options{}, func(e *protocol.Envelope) error {
				if err := e.Validate(); err != nil {
					return err
				}
				b, err := e.AppendJSON(nil)
				out.Write(append(b, '\n'))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("..", "mapper", "testdata", "codex", name+".golden"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Fatalf("replay differs from the mapper's golden file:\n%s", out.Bytes())
			}
			if st.Lines == 0 || st.Other[codex.TypeSessionMeta] != 1 || st.EnvelopeCount() == 0 || st.Turns == 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestReplayCodexLines: a rollout's broken lines are skipped and said, a
// line written twice (the same ordinal) is mapped once, the turn still
// open at the end is closed when asked, and subagent files are refused.
func TestReplayCodexLines(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "codex", "testdata", "samples", "text.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(src), "\n"), "\n")
	// Drop task_complete (the last line), repeat a line, add junk.
	body := append([]string{}, lines[:len(lines)-1]...)
	body = append(body[:9], append([]string{body[8], "not json", "\x00\x01binary"}, body[9:]...)...)
	path := filepath.Join(t.TempDir(), "rollout-2026-11-27T15-46-48-01a21db0-15a3-79c2-bd43-d66cd47ec9ef.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(body, "\n")+"\n{\"cut"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := FindSession([]string{path})
	if err != nil || !s.Codex {
		t.Fatalf("FindSession: %+v, %v", s, err)
	}
	var kinds []string
	st, err := Run(context.Background(), s, Options{End: protocol.StatusCompleted}, func(e *protocol.Envelope) error {
		kinds = append(kinds, string(e.Ev.T))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(kinds, " "); got != "text turn-start text text turn-end" {
		t.Errorf("envelopes %s", got)
	}
	if st.Duplicates != 1 || len(st.Skipped) != 3 || !strings.Contains(st.Skipped[2].Reason, "incomplete") || !strings.Contains(st.Skipped[1].Reason, "binary") {
		t.Errorf("duplicates %d, skipped %+v", st.Duplicates, st.Skipped)
	}
	if _, err := FindSession([]string{path, path}); err == nil || !strings.Contains(err.Error(), "Codex rollout") {
		t.Errorf("a rollout with other files: %v", err)
	}
	// A Claude transcript is not taken for a rollout.
	claude := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(claude, []byte(`{"type":"user","uuid":"u","message":{"role":"user","content":"hi"}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := FindSession([]string{claude}); err != nil || s.Codex {
		t.Errorf("a Claude transcript: %+v, %v", s, err)
	}
}
