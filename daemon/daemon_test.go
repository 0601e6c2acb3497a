package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/protocol"
)

// The test binary stands in for `ccrelay --remote --daemon-pipe`: it
// records its folder, arguments and every line of its stdin, and exits
// when stdin says stop or ends.
func TestMain(m *testing.M) {
	if out := os.Getenv("DAEMON_TEST_CHILD"); out != "" {
		childMain(out)
		return
	}
	os.Exit(m.Run())
}

func childMain(out string) {
	wd, _ := os.Getwd()
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		os.Exit(2)
	}
	defer f.Close()
	rec := func(v map[string]any) {
		b, _ := json.Marshal(v)
		f.Write(append(b, '\n'))
	}
	rec(map[string]any{"pid": os.Getpid(), "dir": wd, "args": os.Args[1:]})
	// A Codex session tells the daemon its thread's id, as Codex chose
	// it (DAEMON_TEST_THREAD), on the descriptor --daemon-report-fd names.
	for i, a := range os.Args {
		if a == "--daemon-report-fd" && i+1 < len(os.Args) && os.Getenv("DAEMON_TEST_THREAD") != "" {
			fd, _ := strconv.Atoi(os.Args[i+1])
			w := os.NewFile(uintptr(fd), "report")
			_, err := fmt.Fprintf(w, "{\"thread\":%q}\n", os.Getenv("DAEMON_TEST_THREAD"))
			w.Close()
			rec(map[string]any{"reported": os.Getenv("DAEMON_TEST_THREAD"), "err": fmt.Sprint(err)})
		}
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		rec(map[string]any{"line": sc.Text()})
		if strings.Contains(sc.Text(), `"stop":true`) {
			rec(map[string]any{"end": "stop"})
			return
		}
	}
	rec(map[string]any{"end": "eof"})
}

// childLog reads what the children recorded.
type childLog struct{ path string }

func (l childLog) records(t *testing.T) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(l.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// waitFor polls until ok is true or the deadline passes: generous, as the
// sessions it waits for are processes, which a loaded machine under -race
// delays by seconds; a wait that is met returns at once.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fakeLink is the relay client: commands in, replies and announcements
// recorded.
type fakeLink struct {
	cmds chan apiclient.Inbound
	mu   sync.Mutex
	info []json.RawMessage
	done map[string]string // command id -> "" (done) or the reason
}

func newFakeLink() *fakeLink {
	return &fakeLink{cmds: make(chan apiclient.Inbound), done: map[string]string{}}
}

func (l *fakeLink) Commands() <-chan apiclient.Inbound { return l.cmds }
func (l *fakeLink) Announce(_ string, info json.RawMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.info = append(l.info, info)
}
func (l *fakeLink) Reply(_ context.Context, _, id string, ok bool, msg string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok {
		msg = ""
	} else if msg == "" {
		msg = "rejected"
	}
	l.done[id] = msg
	return nil
}

func (l *fakeLink) latest() protocol.DaemonInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	var m struct {
		Mode   string              `json:"mode"`
		Daemon protocol.DaemonInfo `json:"daemon"`
	}
	if len(l.info) > 0 {
		json.Unmarshal(l.info[len(l.info)-1], &m)
	}
	return m.Daemon
}

// send sends a command and waits for its answer: "" when done.
func (l *fakeLink) send(t *testing.T, session string, c protocol.Command) string {
	t.Helper()
	if c.ID == "" {
		c.ID = protocol.New()
	}
	l.cmds <- apiclient.Inbound{Session: session, Command: c}
	var msg string
	waitFor(t, "the answer to "+c.Kind, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		var ok bool
		msg, ok = l.done[c.ID]
		return ok
	})
	return msg
}

// writeTranscript makes a past session of Claude Code in dir.
func writeTranscript(t *testing.T, claudeDir, dir, session, prompt string) {
	t.Helper()
	pd, err := claude.ProjectDir(claudeDir, dir)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(pd, 0o700)
	line, _ := json.Marshal(map[string]any{"type": "user", "cwd": dir, "sessionId": session, "uuid": "u1",
		"message": map[string]any{"role": "user", "content": prompt}})
	if err := os.WriteFile(claude.TranscriptPath(pd, session), append(line, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
}

type rig struct {
	link    *fakeLink
	log     childLog
	session string
	cancel  context.CancelFunc
	done    chan error
}

func startRig(t *testing.T, cfg Config) *rig {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{link: newFakeLink(), log: childLog{filepath.Join(t.TempDir(), "children.jsonl")}, session: claude.NewSessionID(), done: make(chan error, 1)}
	ledger, err := launcher.OpenLedger(filepath.Join(t.TempDir(), "commands.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ledger.Close() })
	cfg.Link, cfg.Ledger, cfg.Session = r.link, ledger, r.session
	cfg.Command = []string{self, "--relay", "http://127.0.0.1:1"}
	cfg.Env = append(append(os.Environ(), cfg.Env...), "DAEMON_TEST_CHILD="+r.log.path)
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 10 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- Run(ctx, cfg) }()
	t.Cleanup(r.stop)
	waitFor(t, "the daemon's announcement", func() bool { return r.link.latest().OS != "" })
	return r
}

func (r *rig) stop() {
	r.cancel()
	if r.done != nil {
		<-r.done
		r.done = nil
	}
}

// A session starts in a folder Claude Code knows or under --allow, with
// the model and permission mode asked, the first prompt on its stdin (not
// its command line); folders elsewhere, symbolic links out of a root,
// bypassPermissions without the machine's consent, a resume of nothing, a
// second start of one session and one past --max-sessions are refused with
// a message that says why.
func TestDaemonStartsOnlyWhereAllowed(t *testing.T) {
	claudeDir, known, root, outside := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	past := claude.NewSessionID()
	writeTranscript(t, claudeDir, known, past, "fix the flaky test")
	gone := filepath.Join(t.TempDir(), "gone")
	writeTranscript(t, claudeDir, gone, claude.NewSessionID(), "in a folder since removed")
	sub := filepath.Join(root, "deep", "app")
	os.MkdirAll(sub, 0o700)
	escape := filepath.Join(root, "escape")
	if runtime.GOOS != "windows" {
		if err := os.Symlink(outside, escape); err != nil {
			t.Fatal(err)
		}
	}
	r := startRig(t, Config{ClaudeDir: claudeDir, Roots: []string{root}, MaxSessions: 2, ClaudeVersion: "2.1.330", Machine: "box"})

	// The announcement: the folders Claude Code knows that exist, with
	// their past sessions; the roots; no bypass.
	info := r.link.latest()
	if len(info.Folders) != 1 || info.Folders[0].Dir != known || len(info.Folders[0].Sessions) != 1 ||
		info.Folders[0].Sessions[0].ID != past || info.Folders[0].Sessions[0].Prompt != "fix the flaky test" {
		t.Fatalf("announced folders %+v", info.Folders)
	}
	if info.AllowBypass || len(info.Roots) != 1 || info.ClaudeVersion != "2.1.330" {
		t.Fatalf("announced %+v", info)
	}

	s1 := claude.NewSessionID()
	for _, tc := range []struct {
		name string
		cmd  protocol.Command
		want string // in the reason; "" for done
	}{
		{"outside", protocol.Command{Kind: protocol.CommandStart, Dir: outside, Target: claude.NewSessionID(), Text: "hi"}, "outside the folders"},
		{"removed folder", protocol.Command{Kind: protocol.CommandStart, Dir: gone, Target: claude.NewSessionID(), Text: "hi"}, "cannot start in"},
		{"relative", protocol.Command{Kind: protocol.CommandStart, Dir: "deep", Target: claude.NewSessionID(), Text: "hi"}, "not an absolute path"},
		{"dot-dot out of a root", protocol.Command{Kind: protocol.CommandStart, Dir: root + "/../" + filepath.Base(outside), Target: claude.NewSessionID(), Text: "hi"}, "outside the folders"},
		{"bypass", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: claude.NewSessionID(), Text: "hi", Mode: launcher.PermissionBypass}, "does not allow bypassPermissions"},
		{"unknown mode", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: claude.NewSessionID(), Text: "hi", Mode: "yolo"}, "unknown permission mode"},
		{"model that is a flag", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: claude.NewSessionID(), Text: "hi", Model: "-x"}, "not a model name"},
		{"resume of nothing", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: claude.NewSessionID(), Resume: true}, "no session"},
		{"new with a past id", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: past, Text: "hi"}, "exists already"},
		{"new without a prompt", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: claude.NewSessionID()}, "first prompt"},
		{"stop of nothing", protocol.Command{Kind: protocol.CommandStop, Target: claude.NewSessionID()}, "not running"},
		{"a session's command", protocol.Command{Kind: protocol.CommandPrompt, Text: "hi"}, "start and stop"},
		{"known folder", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: s1, Text: "first prompt here", Model: "sonnet", Mode: "plan"}, ""},
		{"twice", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: s1, Text: "again"}, "already running"},
		{"under a root", protocol.Command{Kind: protocol.CommandStart, Dir: sub, Target: claude.NewSessionID(), Text: "hi"}, ""},
		{"past the most", protocol.Command{Kind: protocol.CommandStart, Dir: sub, Target: claude.NewSessionID(), Text: "hi"}, "most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := r.link.send(t, r.session, tc.cmd)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("answer %q, want %q", got, tc.want)
			}
		})
	}
	if runtime.GOOS != "windows" {
		if got := r.link.send(t, r.session, protocol.Command{Kind: protocol.CommandStart, Dir: escape, Target: claude.NewSessionID(), Text: "hi"}); !strings.Contains(got, "outside the folders") && !strings.Contains(got, "most") {
			t.Fatalf("a symbolic link out of the root: %q", got)
		}
	}
	// Commands for another session are not the daemon's.
	if got := r.link.send(t, claude.NewSessionID(), protocol.Command{Kind: protocol.CommandStop, Target: s1}); !strings.Contains(got, "no session of the daemon") {
		t.Fatalf("another session's command: %q", got)
	}

	waitFor(t, "two sessions started", func() bool {
		n := 0
		for _, m := range r.log.records(t) {
			if m["line"] != nil {
				n++
			}
		}
		return n == 2
	})
	var started []map[string]any
	for _, m := range r.log.records(t) {
		if m["args"] != nil {
			started = append(started, m)
		}
	}
	args := fmt.Sprint(started[0]["args"])
	if started[0]["dir"] != known && started[1]["dir"] != known {
		t.Fatalf("no session started in %s: %v", known, started)
	}
	for _, want := range []string{"--remote", "--daemon-pipe", "--session " + s1, "--started-by " + r.session, "--model=sonnet", "--permission-mode=plan"} {
		if started[0]["dir"] == known && !strings.Contains(args, want) {
			t.Errorf("arguments %s lack %s", args, want)
		}
	}
	for _, s := range started {
		if strings.Contains(fmt.Sprint(s["args"]), "first prompt here") {
			t.Fatalf("the prompt is on the command line: %v", s["args"])
		}
	}
	if !strings.Contains(fmt.Sprint(r.log.records(t)), `"prompt":"first prompt here"`) {
		t.Fatalf("the first prompt did not reach the session's stdin: %v", r.log.records(t))
	}
	// The machine's name goes with it: the session announces it.
	if !strings.Contains(fmt.Sprint(r.log.records(t)), `"machine":"box"`) {
		t.Fatalf("the machine's name did not reach the session's stdin: %v", r.log.records(t))
	}
	waitFor(t, "both sessions announced as running", func() bool { return len(r.link.latest().Running) == 2 })
}

// Stop ends the session it names (it reads stop on its stdin); the
// daemon's end closes every session's stdin, and Run returns only once
// they have all exited. A repeated command is answered from the ledger,
// not carried out again.
func TestDaemonStopAndEnd(t *testing.T) {
	claudeDir, known := t.TempDir(), t.TempDir()
	past := claude.NewSessionID()
	writeTranscript(t, claudeDir, known, past, "an old session")
	r := startRig(t, Config{ClaudeDir: claudeDir})
	a := claude.NewSessionID()
	start := protocol.Command{ID: protocol.New(), Kind: protocol.CommandStart, Dir: known, Target: a, Text: "one"}
	if got := r.link.send(t, r.session, start); got != "" {
		t.Fatal(got)
	}
	// The relay delivers it again (a reconnect): answered, not run again.
	r.link.mu.Lock()
	delete(r.link.done, start.ID)
	r.link.mu.Unlock()
	if got := r.link.send(t, r.session, start); got != "" {
		t.Fatalf("repeat answered %q", got)
	}
	if got := r.link.send(t, r.session, protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: past, Resume: true}); got != "" {
		t.Fatal(got)
	}
	waitFor(t, "two sessions running", func() bool { return len(r.link.latest().Running) == 2 })
	if got := r.link.send(t, r.session, protocol.Command{Kind: protocol.CommandStop, Target: a}); got != "" {
		t.Fatal(got)
	}
	waitFor(t, "the stopped session gone from the announcement", func() bool {
		run := r.link.latest().Running
		return len(run) == 1 && run[0] == past
	})
	r.stop()
	ends := map[string]int{}
	starts := 0
	for _, m := range r.log.records(t) {
		if e, ok := m["end"].(string); ok {
			ends[e]++
		}
		if m["args"] != nil {
			starts++
		}
	}
	if starts != 2 || ends["stop"] != 1 || ends["eof"] != 1 {
		t.Fatalf("starts %d, ends %v; want 2 starts, one stopped, one ended with the daemon", starts, ends)
	}
}
