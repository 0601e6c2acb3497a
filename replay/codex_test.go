package replay

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
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
			// A subagent's rollout, <scenario>.2.jsonl, is given with its
			// parent's (the fixtures' names are not rollout names, which
			// FindSession looks for beside the file).
			args := []string{f}
			if !strings.Contains(strings.TrimSuffix(filepath.Base(f), ".jsonl"), ".") {
				more, _ := filepath.Glob(strings.TrimSuffix(f, ".jsonl") + ".[0-9].jsonl")
				args = append(args, more...)
			}
			s, err := FindSession(args)
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
			if st.Lines == 0 || st.Other[codex.TypeSessionMeta] != len(args) || st.EnvelopeCount() == 0 || st.Turns == 0 {
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
	if st.Duplicates != 1 || len(st.Skipped) != 3 || st.SkippedLines != 3 || !strings.Contains(st.Skipped[2].Reason, "incomplete") || !strings.Contains(st.Skipped[1].Reason, "binary") {
		t.Errorf("duplicates %d, skipped %+v", st.Duplicates, st.Skipped)
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

// TestReplayCodexSubagents: given alone, a rollout is read with the
// rollouts beside it of its subagent threads (and theirs), found by the
// parent their session_meta names; the subagent's envelopes carry its
// subagent id between start and stop, in the parent's turn.
func TestReplayCodexSubagents(t *testing.T) {
	dir := t.TempDir()
	fix := filepath.Join("..", "codex", "testdata", codex.TestedVersion)
	parentID, childID := "01a21dbb-e0d9-7522-8d58-c59df541000b", "01a21dbb-e24b-7ca3-aa69-cdca4f166101"
	copyAs := func(src, id string, edit func(string) string) string {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, "rollout-2026-11-27T15-59-41-"+id+".jsonl")
		if err := os.WriteFile(dst, []byte(edit(string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	same := func(s string) string { return s }
	parent := copyAs(filepath.Join(fix, "exec_subagent.jsonl"), parentID, same)
	child := copyAs(filepath.Join(fix, "exec_subagent.2.jsonl"), childID, same)
	// A grandchild (the child's own subagent) and a thread of another
	// parent.
	grand := copyAs(filepath.Join(fix, "exec_subagent.2.jsonl"), "01a21dbb-0000-7000-8000-000000000003", func(s string) string {
		return strings.ReplaceAll(strings.ReplaceAll(s, childID, "01a21dbb-0000-7000-8000-000000000003"), parentID, childID)
	})
	copyAs(filepath.Join(fix, "exec_subagent.2.jsonl"), "01a21dbb-0000-7000-8000-000000000004", func(s string) string {
		return strings.ReplaceAll(strings.ReplaceAll(s, childID, "01a21dbb-0000-7000-8000-000000000004"), parentID, "01a21dbb-0000-7000-8000-000000000005")
	})
	copyAs(filepath.Join(fix, "exec_text.jsonl"), "01a21dbb-0000-7000-8000-000000000006", same)

	s, err := FindSession([]string{parent})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{grand, child} // in name order
	if !s.Codex || s.ID != parentID || strings.Join(s.Subagents, " ") != strings.Join(want, " ") {
		t.Fatalf("session %+v, want subagents %v", s, want)
	}
	s.Subagents = []string{child}
	var envs []protocol.Envelope
	st, err := Run(context.Background(), s, Options{}, func(e *protocol.Envelope) error {
		envs = append(envs, *e)
		return e.Validate()
	})
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(filepath.Join("..", "mapper", "testdata", "codex", codex.TestedVersion+"_exec_subagent.golden"))
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	sub := ""
	for i := range envs {
		b, _ := envs[i].AppendJSON(nil)
		got.Write(append(b, '\n'))
		if envs[i].Ev.T == protocol.KindStart {
			sub = envs[i].Subagent
		}
	}
	if !bytes.Equal(got.Bytes(), golden) {
		t.Fatalf("replay differs from the golden file:\n%s", got.Bytes())
	}
	if sub == "" || st.Subagents != 1 || st.Files != 2 {
		t.Fatalf("subagent %q, stats %+v", sub, st)
	}
	if _, err := Run(context.Background(), Session{ID: parentID, Main: parent, Subagents: []string{filepath.Join(fix, "README.md")}, Codex: true},
		Options{}, func(*protocol.Envelope) error { return nil }); err == nil {
		t.Fatal("a file that is not a rollout was taken for a subagent's")
	}
}

// A subagent started after midnight has its rollout in the next day's
// folder: replay of the parent's rollout reads it too, as live does.
func TestReplayCodexSubagentNextDay(t *testing.T) {
	sessions := filepath.Join(t.TempDir(), "sessions")
	fix := filepath.Join("..", "codex", "testdata", codex.TestedVersion)
	parentID, childID := "01a21dbb-e0d9-7522-8d58-c59df541000b", "01a21dbb-e24b-7ca3-aa69-cdca4f166101"
	put := func(src, day, id string) string {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(sessions, day)
		os.MkdirAll(dir, 0o700)
		dst := filepath.Join(dir, "rollout-2026-12-31T23-59-41-"+id+".jsonl")
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	parent := put(filepath.Join(fix, "exec_subagent.jsonl"), filepath.Join("2026", "12", "31"), parentID)
	child := put(filepath.Join(fix, "exec_subagent.2.jsonl"), filepath.Join("2027", "01", "01"), childID)
	s, err := FindSession([]string{parent})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Codex || strings.Join(s.Subagents, " ") != child {
		t.Fatalf("session %+v, want the subagent %s", s, child)
	}
}

// A line whose ordinal runs far past the lines before it (hostile or
// damaged) is skipped and said, as the live follower skips it
// (scanner.TestCodexHugeOrdinalSkipped): live equals replay.
func TestReplayCodexHugeOrdinal(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "codex", "testdata", "samples", "text.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(src), "\n"), "\n")
	var odd string
	for _, l := range lines {
		if strings.Contains(l, `"role":"assistant"`) {
			odd = regexp.MustCompile(`"ordinal":\d+`).ReplaceAllString(l, `"ordinal":9223372036854775807`)
		}
	}
	if odd == "" {
		t.Fatal("no assistant message in the sample")
	}
	replay := func(body []string) ([]string, *Stats) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "rollout-2026-11-27T15-46-48-01a21db0-15a3-79c2-bd43-d66cd47ec9ef.jsonl")
		if err := os.WriteFile(path, []byte(strings.Join(body, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := FindSession([]string{path})
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		st, err := Run(context.Background(), s, Options{}, func(e *protocol.Envelope) error {
			kinds = append(kinds, string(e.Ev.T))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return kinds, st
	}
	want, _ := replay(lines)
	got, st := replay(append(append(append([]string{}, lines[:3]...), odd), lines[3:]...))
	if strings.Join(got, " ") != strings.Join(want, " ") || len(st.Skipped) != 1 || !strings.Contains(st.Skipped[0].Reason, "far past") {
		t.Fatalf("envelopes %v (without the line: %v), skipped %+v", got, want, st.Skipped)
	}
}
