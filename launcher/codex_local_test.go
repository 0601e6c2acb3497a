package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

func TestCodexRunKind(t *testing.T) {
	const id = "01a21daf-e89b-7892-97c7-2fee8a1b050d"
	for _, tc := range []struct {
		args             []string
		originator, resu string
	}{
		{nil, CodexOriginatorTUI, ""},
		{[]string{"fix the test"}, CodexOriginatorTUI, ""},
		{[]string{"resume", id}, CodexOriginatorTUI, id},
		{[]string{"-m", "gpt-5.5", "resume", id}, CodexOriginatorTUI, id},
		{[]string{"--no-daemon", "-c", "model=\"x\"", "resume", "01A21DAF-E89B-7892-97C7-2FEE8A1B050D"}, CodexOriginatorTUI, id},
		{[]string{"resume", "--last"}, CodexOriginatorTUI, ""},
		{[]string{"resume"}, CodexOriginatorTUI, ""},
		{[]string{"exec", "say hi"}, CodexOriginatorExec, ""},
		{[]string{"e", "--json", "resume", id, "again"}, CodexOriginatorExec, id},
		{[]string{"-m", "resume", id}, CodexOriginatorTUI, ""}, // -m takes "resume" as its value
	} {
		o, r := codexRunKind(tc.args)
		if o != tc.originator || r != tc.resu {
			t.Errorf("codexRunKind(%q) = %q, %q; want %q, %q", tc.args, o, r, tc.originator, tc.resu)
		}
	}
}

// rolloutFor writes a rollout of thread under home's sessions folder whose
// session_meta names cwd and originator; it returns its path.
func rolloutFor(t *testing.T, home, day, thread, cwd, originator string) string {
	t.Helper()
	dir := filepath.Join(codex.SessionsDir(home), day)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "rollout-2026-11-27T15-46-37-"+thread+".jsonl")
	meta := fmt.Sprintf(`{"timestamp":"2026-11-27T15:46:37.369Z","ordinal":0,"type":"session_meta","payload":{"id":%q,"cwd":%q,"originator":%q,"source":"cli","cli_version":"0.169.0"}}`+"\n",
		thread, cwd, originator)
	if err := os.WriteFile(p, []byte(meta), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func appendTo(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// A Codex run's threads are the rollouts that appear after its start, or
// grow (a resume), whose session_meta names the run's folder and the TUI
// as originator; a thread the arguments resume by id is the run's
// wherever it ran; a rollout whose first line is not whole yet is judged
// once it is; each is reported once.
func TestCodexWatchFindsThisRunsThreads(t *testing.T) {
	home, cwd, other := t.TempDir(), t.TempDir(), t.TempDir()
	id := func(n int) string { return fmt.Sprintf("01a21daf-e89b-7892-97c7-2fee8a1b%04d", n) }
	day := filepath.Join("2026", "11", "27")
	old := rolloutFor(t, home, day, id(1), cwd, CodexOriginatorTUI)         // there before, untouched
	resumed := rolloutFor(t, home, day, id(2), cwd, CodexOriginatorTUI)     // there before, grows
	elsewhere := rolloutFor(t, home, day, id(3), other, CodexOriginatorTUI) // the id resumed, another folder
	otherGrows := rolloutFor(t, home, day, id(4), other, CodexOriginatorTUI)
	var mu sync.Mutex
	var got []string
	w := newCodexWatch(home, cwd, []string{"resume", id(3)}, func(p string, m *codex.SessionMeta) {
		mu.Lock()
		got = append(got, filepath.Base(p))
		mu.Unlock()
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	// Every rollout is held by this run's Codex (several threads: /new);
	// another Codex's are TestCodexWatchAnotherCodex's.
	w.holderOf = func(string, int) rolloutHolder { return holderOurs }
	w.snapshot()
	if w.scan(); len(got) != 1 || got[0] != filepath.Base(elsewhere) {
		t.Fatalf("first scan reported %v; want only the thread resumed by id", got)
	}
	appendTo(t, resumed, `{"ordinal":1,"type":"event_msg","payload":{"type":"task_started"}}`+"\n")
	appendTo(t, otherGrows, `{"ordinal":1,"type":"event_msg","payload":{"type":"task_started"}}`+"\n")
	fresh := rolloutFor(t, home, filepath.Join("2026", "11", "28"), id(5), cwd, CodexOriginatorTUI)
	rolloutFor(t, home, day, id(6), other, CodexOriginatorTUI) // another folder
	rolloutFor(t, home, day, id(7), cwd, CodexOriginatorExec)  // codex exec in this folder
	torn := filepath.Join(filepath.Dir(fresh), "rollout-2026-11-28T10-00-00-"+id(8)+".jsonl")
	whole := fmt.Sprintf(`{"ordinal":0,"type":"session_meta","payload":{"id":%q,"cwd":%q,"originator":"codex-tui"}}`+"\n", id(8), cwd)
	appendTo(t, torn, whole[:30])
	if pending := w.scan(); !pending {
		t.Error("a rollout with half a first line was not left for later")
	}
	appendTo(t, torn, whole[30:])
	if pending := w.scan(); pending {
		t.Error("still pending once whole")
	}
	w.scan()
	slices.Sort(got)
	want := []string{filepath.Base(resumed), filepath.Base(elsewhere), filepath.Base(fresh), filepath.Base(torn)}
	slices.Sort(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("reported %v\nwant %v", got, want)
	}
	_ = old
}

// Under `codex exec`, the run's threads are exec's.
func TestCodexWatchExec(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	var got []string
	w := newCodexWatch(home, cwd, []string{"exec", "--json", "say hi"}, func(p string, m *codex.SessionMeta) { got = append(got, m.Originator) },
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	w.snapshot()
	rolloutFor(t, home, "d", "01a21daf-e89b-7892-97c7-2fee8a1b0001", cwd, CodexOriginatorTUI)
	rolloutFor(t, home, "d", "01a21daf-e89b-7892-97c7-2fee8a1b0002", cwd, CodexOriginatorExec)
	w.scan()
	if fmt.Sprint(got) != "["+CodexOriginatorExec+"]" {
		t.Fatalf("reported %v", got)
	}
}

// fakeCodexMapper maps each record into one envelope named by its
// ordinal, and a close into one more; it counts what it was given.
type fakeCodexMapper struct {
	thread string
	mapped []int64
}

func (m *fakeCodexMapper) Map(r *codex.Record) []protocol.Envelope {
	m.mapped = append(m.mapped, r.Ordinal)
	return []protocol.Envelope{{ID: fmt.Sprintf("%s-%d", m.thread[:4], r.Ordinal)}}
}

func (m *fakeCodexMapper) Close(status protocol.TurnStatus) []protocol.Envelope {
	return []protocol.Envelope{{ID: m.thread[:4] + "-close-" + string(status)}}
}

type flakyOutbox struct {
	MemOutbox
	fail int
}

func (o *flakyOutbox) Append(ctx context.Context, s string, envs []protocol.Envelope) error {
	if o.fail > 0 {
		o.fail--
		return errors.New("disk full")
	}
	return o.MemOutbox.Append(ctx, s, envs)
}

func codexLines(thread string, replayed bool, from, to int, model string) []scanner.CodexLine {
	var out []scanner.CodexLine
	for o := from; o < to; o++ {
		r := &codex.Record{Ordinal: int64(o), HasOrdinal: true, Type: codex.TypeEventMsg}
		if model != "" && o == from {
			r.Type, r.TurnContext = codex.TypeTurnContext, &codex.TurnContext{Model: model}
		}
		out = append(out, scanner.CodexLine{Record: r, Thread: thread, Ordinal: int64(o), Replayed: replayed})
	}
	return out
}

// The pipeline maps each thread with its own mapper: replayed lines
// rebuild its state and are not appended again; a batch delivered again
// after a failed append is not mapped twice; a model named by a
// turn_context is reported once per change; Close ends every thread.
func TestCodexPipeline(t *testing.T) {
	const a, b = "aaaa1111-0000-4000-8000-000000000000", "bbbb2222-0000-4000-8000-000000000000"
	box := &flakyOutbox{}
	mappers := map[string]*fakeCodexMapper{}
	p := NewCodexPipeline(box, func(thread string) CodexMapper {
		m := &fakeCodexMapper{thread: thread}
		mappers[thread] = m
		return m
	})
	var models []string
	p.OnModel(func(thread, model string) { models = append(models, thread[:4]+"="+model) })
	ctx := context.Background()
	deliver := func(bt scanner.CodexBatch) error { return p.DeliverCodex(ctx, bt) }
	if err := deliver(scanner.CodexBatch{Thread: a, Lines: append(codexLines(a, true, 0, 2, "gpt-5.5"), codexLines(a, false, 2, 4, "")...)}); err != nil {
		t.Fatal(err)
	}
	box.fail = 1
	batch := scanner.CodexBatch{Thread: a, Lines: codexLines(a, false, 4, 6, "gpt-5.5")}
	if err := deliver(batch); err == nil {
		t.Fatal("a failed append was not reported")
	}
	batch.Retry = true
	if err := deliver(batch); err != nil {
		t.Fatal(err)
	}
	if err := deliver(scanner.CodexBatch{Thread: b, Lines: codexLines(b, false, 0, 1, "gpt-6")}); err != nil {
		t.Fatal(err)
	}
	if err := deliver(scanner.CodexBatch{Thread: a, Lines: codexLines(a, false, 6, 7, "o3")}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx, protocol.StatusFailed); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range box.Envelopes() {
		ids = append(ids, e.ID)
	}
	want := "[aaaa-2 aaaa-3 aaaa-4 aaaa-5 bbbb-0 aaaa-6 aaaa-close-failed bbbb-close-failed]"
	if fmt.Sprint(ids) != want {
		t.Errorf("appended %v\nwant     %v", ids, want)
	}
	if fmt.Sprint(mappers[a].mapped) != "[0 1 2 3 4 5 6]" {
		t.Errorf("thread a mapped %v", mappers[a].mapped)
	}
	if fmt.Sprint(models) != "[aaaa=gpt-5.5 bbbb=gpt-6 aaaa=o3]" || p.Model(a) != "o3" {
		t.Errorf("models %v, now %q", models, p.Model(a))
	}
	if fmt.Sprint(p.Threads()) != fmt.Sprint([]string{a, b}) {
		t.Errorf("threads %v", p.Threads())
	}
}

// A rollout whose session_meta is another thread's than its name says (a
// rollout copied or renamed into the folder) is not this run's thread: it
// would be followed under the name's thread, another thread's records in
// it. A session_meta without an id is judged by its name, as before.
func TestCodexWatchMetaNamesItsThread(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	id := func(n int) string { return fmt.Sprintf("01a21daf-e89b-7892-97c7-2fee8a1b%04d", n) }
	var got []string
	w := newCodexWatch(home, cwd, []string{"resume", id(2)}, func(p string, m *codex.SessionMeta) { got = append(got, filepath.Base(p)) },
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	w.holderOf = func(string, int) rolloutHolder { return holderOurs } // threads of this run's Codex
	w.snapshot()
	dir := filepath.Join(codex.SessionsDir(home), "d")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, metaID string) string {
		p := filepath.Join(dir, "rollout-2026-11-27T15-46-37-"+name+".jsonl")
		meta := fmt.Sprintf(`{"ordinal":0,"type":"session_meta","payload":{"id":%q,"cwd":%q,"originator":"codex-tui"}}`+"\n", metaID, cwd)
		if err := os.WriteFile(p, []byte(meta), 0o600); err != nil {
			t.Fatal(err)
		}
		return filepath.Base(p)
	}
	write(id(1), id(9))       // a new rollout of this folder, another thread's inside
	write(id(2), id(8))       // the thread resumed by id, another thread's inside
	ok := write(id(3), id(3)) // this run's
	noID := write(id(4), "")  // no id inside: judged by its name
	upper := write(id(5), strings.ToUpper(id(5)))
	w.scan()
	slices.Sort(got)
	if want := []string{ok, noID, upper}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("reported %v\nwant %v", got, want)
	}
}
