package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// The hook takes only UUIDs as session ids: anything else would reach
// Claude's command line (--resume) and name files.
func TestHookRefusesSessionIDNotUUID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"11111111-2222-4333-8444-555555555555", true},
		{"ABCDEF01-2222-4333-8444-555555555555", true},
		{"--dangerously-skip-permissions", false},
		{"s", false},
		{"../../../etc/passwd", false},
		{"11111111-2222-4333-8444-55555555555", false},
		{"11111111-2222-4333-8444-555555555555\n--model=x", false},
		{" 11111111-2222-4333-8444-555555555555", false},
		{"11111111-2222-4333-8444-55555555555g", false},
	} {
		t.Run(tc.id, func(t *testing.T) {
			var got []string
			h, err := startHookServer(func(s SessionStart) { got = append(got, s.SessionID) }, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer h.close()
			body, _ := json.Marshal(SessionStart{SessionID: tc.id, Source: "startup"})
			req, _ := http.NewRequest(http.MethodPost, h.url, bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+h.token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if tc.ok != (resp.StatusCode == http.StatusOK) || tc.ok != (len(got) == 1) {
				t.Fatalf("status %s, sessions %q; want accepted=%v", resp.Status, got, tc.ok)
			}
		})
	}
}

// The session id goes to Claude as one argv item, --session-id=<id> on the
// first start and --resume=<id> after.
func TestRemoteSessionIDIsOneArgvItem(t *testing.T) {
	for _, resume := range []bool{false, true} {
		want := "--session-id=" + rigSession
		if resume {
			want = "--resume=" + rigSession
		}
		t.Run(want, func(t *testing.T) {
			rig := newRemoteRig(t, map[string]any{"turns": []any{steps(map[string]any{"text": "ok"})}}, RemoteOptions{Resume: resume})
			if resume {
				rig.seedTranscript("earlier")
			}
			rig.prompt("hi")
			rig.until("turn", has("TE(completed)", 1))
			argv := rig.argv()
			if len(argv) != 1 || !slices.Contains(argv[0], want) {
				t.Fatalf("argv %q, want an item %q", argv, want)
			}
			for _, a := range argv[0] {
				if a == "--resume" || a == "--session-id" || a == "-r" {
					t.Fatalf("argv %q has %q apart from its value", argv[0], a)
				}
			}
		})
	}
}

// A session id that is not a UUID never reaches Claude.
func TestRemoteRefusesSessionIDNotUUID(t *testing.T) {
	arglog := filepath.Join(t.TempDir(), "args")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin", "FAKE_CLAUDE_ARGLOG=" + arglog}
	const bad = "--dangerously-skip-permissions"
	r := NewRemote(bad, RemoteOptions{Claude: fakeClaude, Dir: t.TempDir(), Env: env, Logger: log}, NewPipeline("", &MemOutbox{}), &events{})
	defer r.Stop(protocol.StatusCancelled)
	if err := r.Prompt(context.Background(), "hi"); err == nil || !strings.Contains(err.Error(), "not a UUID") {
		t.Fatalf("prompt: %v", err)
	}
	code, err := RunLoop(context.Background(), LoopOptions{StartRemote: true, Session: bad,
		Local: LocalOptions{Claude: fakeClaude, Env: env}, Pipeline: NewPipeline("", &MemOutbox{}), Logger: log})
	if err == nil || !strings.Contains(err.Error(), "not a UUID") {
		t.Fatalf("RunLoop = %d, %v", code, err)
	}
	if argv := readArgLog(t, arglog); len(argv) != 0 {
		t.Fatalf("claude started: %q", argv)
	}
}

func TestCheckModel(t *testing.T) {
	for _, tc := range []struct {
		model string
		ok    bool
	}{
		{"opus", true}, {"default", true}, {"sonnet[1m]", true}, {"claude-opus-4-5-20251101", true},
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", true}, {"claude-sonnet-4-5@20250929", true},
		{"", false}, {"-", false}, {"--dangerously-skip-permissions", false}, {"-p", false},
		{"opus --dangerously-skip-permissions", false}, {"opus\n", false}, {"opus=x", false}, {"$(id)", false},
		{strings.Repeat("a", MaxModelName), true}, {strings.Repeat("a", MaxModelName+1), false},
	} {
		if err := CheckModel(tc.model); (err == nil) != tc.ok {
			t.Errorf("CheckModel(%q) = %v, want ok=%v", tc.model, err, tc.ok)
		}
	}
}

func TestCheckPermissionMode(t *testing.T) {
	for _, tc := range []struct {
		mode         string
		allowBypass  bool
		ok           bool
		bypassRefuse bool
	}{
		{"default", false, true, false}, {"manual", false, true, false}, {"acceptEdits", false, true, false},
		{"plan", false, true, false}, {"auto", false, true, false}, {"dontAsk", false, true, false},
		{"bypassPermissions", false, false, true}, {"bypassPermissions", true, true, false},
		{"", true, false, false}, {"yolo", true, false, false}, {"--dangerously-skip-permissions", true, false, false},
		{"Plan", true, false, false}, {"plan ", true, false, false},
	} {
		err := CheckPermissionMode(tc.mode, tc.allowBypass)
		if (err == nil) != tc.ok || errors.Is(err, ErrBypassNotAllowed) != tc.bypassRefuse {
			t.Errorf("CheckPermissionMode(%q, %v) = %v", tc.mode, tc.allowBypass, err)
		}
	}
}

// Model and permission mode from the app are checked where the command
// enters: what is refused is answered rejected with the reason and never
// reaches Claude, whether it runs or not; bypassPermissions only with the
// opt-in.
func TestLoopChecksModelAndPermissionMode(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprint("allowBypass=", allow), func(t *testing.T) {
			stream := filepath.Join(t.TempDir(), "stream.json")
			writeJSON(t, stream, map[string]any{"turns": []any{steps(map[string]any{"text": "ok"})}})
			arglog := filepath.Join(t.TempDir(), "args")
			env := []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin", "FAKE_CLAUDE_STREAM=" + stream, "FAKE_CLAUDE_ARGLOG=" + arglog}
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			out := &MemOutbox{}
			cmds := make(chan Command)
			ev := &events{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := RunLoop(ctx, LoopOptions{StartRemote: true, Session: rigSession,
					Local:    LocalOptions{Claude: fakeClaude, Dir: t.TempDir(), Env: env, Logger: log},
					Remote:   RemoteOptions{StopTimeout: time.Second, AllowBypass: allow},
					Pipeline: NewPipeline("", out), Commands: cmds, Events: ev, Logger: log})
				done <- err
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			}()
			n := 0
			send := func(c protocol.Command) error {
				n++
				c.ID = fmt.Sprint("c", n)
				reply := make(chan error, 1)
				cmds <- Command{Command: c, Reply: func(err error) { reply <- err }}
				return <-reply
			}
			type check struct {
				kind, value string
				refused     string // "" accepted, else a piece of the reason
			}
			run := func(checks []check) {
				t.Helper()
				for _, c := range checks {
					cmd := protocol.Command{Kind: c.kind}
					if c.kind == protocol.CommandModel {
						cmd.Model = c.value
					} else {
						cmd.Mode = c.value
					}
					err := send(cmd)
					if c.refused == "" && err != nil {
						t.Errorf("%s %q rejected: %v", c.kind, c.value, err)
					}
					if c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)) {
						t.Errorf("%s %q: %v, want rejected with %q", c.kind, c.value, err, c.refused)
					}
				}
			}
			bypass := check{protocol.CommandPermissionMode, "bypassPermissions", "--allow-bypass-from-app"}
			if allow {
				bypass.refused = ""
			}
			// Before Claude runs: kept for its start.
			run([]check{
				{protocol.CommandModel, "--dangerously-skip-permissions", "not a model name"},
				{protocol.CommandModel, "opus --dangerously-skip-permissions", "not a model name"},
				{protocol.CommandModel, "", "no model"},
				{protocol.CommandModel, "sonnet[1m]", ""},
				{protocol.CommandPermissionMode, "--dangerously-skip-permissions", "unknown permission mode"},
				{protocol.CommandPermissionMode, "yolo", "unknown permission mode"},
				{protocol.CommandPermissionMode, "plan", ""},
				bypass,
				{protocol.CommandModel, "-p", "not a model name"},
			})
			if err := send(protocol.Command{Kind: protocol.CommandPrompt, Text: "hi"}); err != nil {
				t.Fatalf("prompt: %v", err)
			}
			wantMode := "--permission-mode=plan"
			if allow {
				wantMode = "--permission-mode=bypassPermissions"
			}
			argv := readArgLog(t, arglog)
			if len(argv) != 1 || !slices.Contains(argv[0], "--model=sonnet[1m]") || !slices.Contains(argv[0], wantMode) {
				t.Fatalf("argv %q, want --model=sonnet[1m] and %s", argv, wantMode)
			}
			for _, a := range argv[0] {
				if a == "--model" || a == "--permission-mode" || strings.HasPrefix(a, "--dangerously") {
					t.Fatalf("argv %q has %q", argv[0], a)
				}
			}
			// While Claude runs: refused commands never reach it.
			run([]check{
				{protocol.CommandPermissionMode, "default", ""},
				{protocol.CommandModel, "--dangerously-skip-permissions", "not a model name"},
				{protocol.CommandPermissionMode, "yolo", "unknown permission mode"},
				bypass,
			})
			st := ev.last()
			wantState := "default"
			if allow {
				wantState = "bypassPermissions"
			}
			if st.PermissionMode != wantState || st.Model != "sonnet[1m]" {
				t.Fatalf("state %+v, want mode %s and model sonnet[1m]", st, wantState)
			}
			if argv := readArgLog(t, arglog); len(argv) != 1 {
				t.Fatalf("claude started %d times", len(argv))
			}
		})
	}
}

// secretEnv is an environment holding ccrelay's secrets, as a user's shell
// may.
var secretEnv = []string{"CCRELAY_TOKEN=relay-secret-1", "CCRELAY_HOOK_TOKEN=hook-secret-2", "CCRELAY_HOOK_URL=http://127.0.0.1:1/x"}

// checkNoSecrets fails if Claude's environment dump holds any ccrelay
// variable or any of the given secrets.
func checkNoSecrets(t *testing.T, dump string, secrets ...string) {
	t.Helper()
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatalf("no environment dump from claude: %v", err)
	}
	env := string(b)
	if !strings.Contains(env, "HOME=") {
		t.Fatalf("dump %q has no HOME", env)
	}
	for _, kv := range strings.Split(env, "\n") {
		if strings.HasPrefix(kv, EnvPrefix) {
			t.Errorf("claude's environment has %q", kv)
		}
	}
	for _, s := range append(secrets, "relay-secret-1", "hook-secret-2") {
		if s != "" && strings.Contains(env, s) {
			t.Errorf("claude's environment holds the secret %q", s)
		}
	}
}

// Local mode: Claude (and every tool it runs) sees none of ccrelay's
// variables, nor the hook's per-run token, which the hook reads from a
// 0600 file; the hook still reports the session.
func TestRunLocalClaudeEnvHasNoSecrets(t *testing.T) {
	dump, arglog := filepath.Join(t.TempDir(), "env"), filepath.Join(t.TempDir(), "args")
	r := newFakeRun(t, map[string]any{"lines": []string{`{"type":"user","uuid":"u1","sessionId":"{{session}}","message":{"content":"hi"}}`}, "hang": true},
		append([]string{"FAKE_CLAUDE_ENVDUMP=" + dump, "FAKE_CLAUDE_ARGLOG=" + arglog}, secretEnv...)...)
	sessions := make(chan SessionStart, 1)
	o := r.options(func(s SessionStart) { sessions <- s })
	o.Args = []string{"--session-id=" + rigSession}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := RunLocal(ctx, o); done <- err }()
	select {
	case s := <-sessions:
		if s.SessionID != rigSession {
			t.Fatalf("hook reported %+v", s)
		}
	case err := <-done:
		t.Fatalf("claude ended before its hook reported: %v", err)
	}
	// The hook file, named by the settings Claude was given.
	argv := readArgLog(t, arglog)
	var settings string
	for _, a := range argv[0] {
		if v, ok := strings.CutPrefix(a, "--settings="); ok {
			settings = v
		}
	}
	sb, err := os.ReadFile(settings)
	if err != nil {
		t.Fatalf("settings %q of argv %q: %v", settings, argv, err)
	}
	var sj struct {
		Hooks map[string][]struct {
			Hooks []struct{ Command string } `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(sb, &sj); err != nil || len(sj.Hooks["SessionStart"]) != 1 {
		t.Fatalf("settings %s: %v", sb, err)
	}
	fields := strings.Fields(sj.Hooks["SessionStart"][0].Hooks[0].Command)
	hookPath := fields[len(fields)-1]
	fi, err := os.Stat(hookPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("hook file %s: %v %v", hookPath, fi.Mode(), err)
	}
	if di, err := os.Stat(filepath.Dir(hookPath)); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("hook folder: %v %v", di.Mode(), err)
	}
	hf, err := readHookFile(hookPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sb), hf.Token) {
		t.Fatal("the settings file holds the hook token")
	}
	checkNoSecrets(t, dump, hf.Token)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(hookPath); !os.IsNotExist(err) {
		t.Fatalf("hook file left behind: %v", err)
	}
}

// Remote mode: the same for the headless Claude.
func TestRemoteClaudeEnvHasNoSecrets(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{steps(map[string]any{"text": "ok"})}}, RemoteOptions{Env: secretEnv})
	rig.prompt("hi")
	rig.until("turn", has("TE(completed)", 1))
	checkNoSecrets(t, rig.envdump)
}

// The hook command refuses a hook file others can read.
func TestForwardHookRefusesOpenHookFile(t *testing.T) {
	called := false
	h, err := startHookServer(func(SessionStart) { called = true }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604} {
		p := filepath.Join(t.TempDir(), "hook.json")
		b, _ := json.Marshal(hookFile{URL: h.url, Token: h.token})
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		err := ForwardHook(context.Background(), strings.NewReader(`{"session_id":"`+rigSession+`"}`), p)
		if err == nil || !strings.Contains(err.Error(), "readable by others") || called {
			t.Fatalf("mode %04o: %v, called %v", mode, err, called)
		}
	}
	if err := ForwardHook(context.Background(), strings.NewReader(`{}`), ""); err == nil {
		t.Fatal("no hook file: no error")
	}
}
