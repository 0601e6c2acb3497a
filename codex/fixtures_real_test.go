package codex_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/internal/codextest"
	"github.com/ccrelay/ccrelay/internal/fakeresponses"
)

var updateCodex = flag.Bool("update-codex", false, "rewrite testdata/<codex.TestedVersion>/ from what the real Codex writes")

// realFixture is one scenario run with the real Codex against the fake
// Responses API; its rollouts become testdata/<version>/<name>.jsonl (a
// second thread's, a subagent's, <name>.2.jsonl), and an app-server run's
// messages <name>.rpc.jsonl.
type realFixture struct {
	name string
	// threads is how many rollouts the scenario writes.
	threads int
	// run drives Codex in e and returns the app-server driver it used (nil
	// for exec), closed.
	run func(t *testing.T, e *codextest.Env) *rpcDriver
	// requests are the server requests an app-server run must get.
	requests []string
	// racy are record kinds (as shapes gives them) Codex writes on some
	// runs only: the check leaves them out.
	racy []string
}

var realFixtures = []realFixture{
	{name: "exec_text", threads: 1, run: func(t *testing.T, e *codextest.Env) *rpcDriver {
		wantOut(t, e.Exec(t, "say hi"), fakeresponses.TextReply)
		return nil
	}},
	{name: "exec_shell", threads: 1, run: func(t *testing.T, e *codextest.Env) *rpcDriver {
		wantOut(t, e.Exec(t, "SHELL: list the files"), "hello-from-shell")
		return nil
	}},
	{name: "exec_resume", threads: 1, run: func(t *testing.T, e *codextest.Env) *rpcDriver {
		out := e.Exec(t, "say hi")
		var started struct {
			Type     string `json:"type"`
			ThreadID string `json:"thread_id"`
		}
		json.Unmarshal(bytes.SplitN(out, []byte("\n"), 2)[0], &started)
		if started.Type != "thread.started" || started.ThreadID == "" {
			t.Fatalf("no thread.started first:\n%s", out)
		}
		wantOut(t, e.Exec(t, "resume", started.ThreadID, "SHELL: the second prompt"), "hello-from-shell")
		return nil
	}},
	// The command still runs when the turn ends; exec kills it as it
	// exits, and the CommandExecution item it then writes, after
	// task_complete, is there on some runs only.
	{name: "exec_slow_command", threads: 1, racy: []string{"event_msg/item_completed/CommandExecution"}, run: func(t *testing.T, e *codextest.Env) *rpcDriver {
		wantOut(t, e.Exec(t, "SLOWSHELL: run something long"), fakeresponses.SlowReply)
		return nil
	}},
	{name: "exec_subagent", threads: 2, run: func(t *testing.T, e *codextest.Env) *rpcDriver {
		wantOut(t, e.Exec(t, "SUBAGENT: ask a helper"), fakeresponses.SubagentReply)
		return nil
	}},
	{name: "exec_patch_edit", threads: 1, run: func(t *testing.T, e *codextest.Env) *rpcDriver {
		wantOut(t, e.Exec(t, "-s", "workspace-write", "PATCHEDIT: edit notes.txt"), fakeresponses.EditReply)
		wantFile(t, filepath.Join(e.Project, fakeresponses.EditFile), fakeresponses.EditAfter)
		return nil
	}},
	{name: "app_patch_edit_accepted", threads: 1, requests: []string{"item/fileChange/requestApproval"}, run: func(t *testing.T, e *codextest.Env) *rpcDriver {
		d := appTurn(t, e, "accept", "PATCHEDIT: edit notes.txt")
		wantFile(t, filepath.Join(e.Project, fakeresponses.EditFile), fakeresponses.EditAfter)
		return d
	}},
	{name: "app_patch_accepted", threads: 1, requests: []string{"item/fileChange/requestApproval"}, run: func(t *testing.T, e *codextest.Env) *rpcDriver {
		d := appTurn(t, e, "accept", "PATCH: add hello.txt")
		wantFile(t, filepath.Join(e.Project, fakeresponses.PatchFile), fakeresponses.PatchContent)
		return d
	}},
	{name: "app_patch_declined", threads: 1, requests: []string{"item/fileChange/requestApproval"}, run: func(t *testing.T, e *codextest.Env) *rpcDriver {
		d := appTurn(t, e, "decline", "PATCH: add hello.txt")
		wantFile(t, filepath.Join(e.Project, fakeresponses.PatchFile), "")
		return d
	}},
	{name: "app_escalate_accepted", threads: 1, requests: []string{"item/commandExecution/requestApproval"}, run: func(t *testing.T, e *codextest.Env) *rpcDriver {
		d := appTurn(t, e, "accept", "ESCALATE: write outside the sandbox")
		wantFile(t, filepath.Join(e.Project, "escalated.txt"), "escalated\n")
		return d
	}},
	{name: "app_escalate_declined", threads: 1, requests: []string{"item/commandExecution/requestApproval"}, run: func(t *testing.T, e *codextest.Env) *rpcDriver {
		d := appTurn(t, e, "decline", "ESCALATE: write outside the sandbox")
		wantFile(t, filepath.Join(e.Project, "escalated.txt"), "")
		return d
	}},
	{name: "app_askuser", threads: 1, requests: []string{"item/tool/requestUserInput"}, run: func(t *testing.T, e *codextest.Env) *rpcDriver {
		// request_user_input is offered in Plan mode only.
		plan := map[string]any{"collaborationMode": map[string]any{"mode": "plan", "settings": map[string]any{"model": codextest.Model}}}
		return appTurnWith(t, e, "accept", "ASKUSER: pick a colour", plan)
	}},
	{name: "app_interrupt", threads: 1, run: func(t *testing.T, e *codextest.Env) *rpcDriver {
		d := startAppServer(t, e, decide("decline"))
		thread := d.startThread(e.Project)
		turn := d.startTurn(thread, "SLOWTEXT: tell a long story", nil)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := e.API.WaitPaused(ctx, 1); err != nil {
			t.Fatal(err)
		}
		// Interrupt once Codex has shown some of the text: what it had
		// read before is then in the rollout every time.
		d.waitFor("item/agentMessage/delta")
		d.call("turn/interrupt", map[string]any{"threadId": thread, "turnId": turn})
		var done struct {
			Turn struct {
				Status string `json:"status"`
			} `json:"turn"`
		}
		json.Unmarshal(d.waitFor("turn/completed"), &done)
		if done.Turn.Status != "interrupted" {
			t.Errorf("the interrupted turn ended %q", done.Turn.Status)
		}
		d.close()
		return d
	}},
}

// appTurn runs one turn with prompt over app-server, answering approvals
// with decision, and closes the server.
func appTurn(t *testing.T, e *codextest.Env, decision, prompt string) *rpcDriver {
	t.Helper()
	return appTurnWith(t, e, decision, prompt, nil)
}

// appTurnWith is appTurn with extra turn/start params.
func appTurnWith(t *testing.T, e *codextest.Env, decision, prompt string, extra map[string]any) *rpcDriver {
	t.Helper()
	d := startAppServer(t, e, decide(decision))
	thread := d.startThread(e.Project)
	d.startTurn(thread, prompt, extra)
	d.waitFor("turn/completed")
	d.close()
	return d
}

func wantOut(t *testing.T, out []byte, want string) {
	t.Helper()
	if !bytes.Contains(out, []byte(want)) {
		t.Fatalf("codex's output lacks %q:\n%s", want, out)
	}
}

// wantFile checks that path holds want ("" for no file).
func wantFile(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if want == "" {
		if err == nil {
			t.Fatalf("%s exists", path)
		}
		return
	}
	if err != nil || string(b) != want {
		t.Fatalf("%s: %v, %q", path, err, b)
	}
}

// TestRealCodexFixtures runs each scenario with the real Codex against the
// fake Responses API. With -update-codex it writes the rollouts to
// testdata/<codex.TestedVersion>/; without, it checks that the fixtures
// there still describe what the installed Codex writes: the same records,
// of the same types, in the same order (ids, times and text aside), so
// that a Codex that changes its format fails here.
func TestRealCodexFixtures(t *testing.T) {
	bin := codextest.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v, err := codex.InstalledVersion(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	if v != codex.TestedVersion {
		t.Fatalf("Codex %s is installed; the fixtures are of %s", v, codex.TestedVersion)
	}
	dir := filepath.Join("testdata", codex.TestedVersion)
	for _, f := range realFixtures {
		t.Run(f.name, func(t *testing.T) {
			e := codextest.New(t)
			t0 := time.Now()
			d := f.run(t, e)
			t.Logf("%s: %v", f.name, time.Since(t0).Round(time.Millisecond))
			files := e.Rollouts(t)
			if len(files) != f.threads {
				t.Fatalf("%d rollouts, want %d: %q", len(files), f.threads, files)
			}
			if d != nil && !slices.Equal(d.serverRequests(), f.requests) {
				t.Fatalf("server requests %q, want %q", d.serverRequests(), f.requests)
			}
			for i, file := range files {
				raw, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				got := scrubRollout(e, raw)
				name := filepath.Join(dir, fixtureName(f.name, i, ".jsonl"))
				if *updateCodex {
					writeFixture(t, name, got)
					continue
				}
				want, err := os.ReadFile(name)
				if err != nil {
					t.Fatalf("%v (go test ./codex -run TestRealCodexFixtures -update-codex writes it)", err)
				}
				g, w := shapes(t, got), shapes(t, want)
				g = slices.DeleteFunc(g, func(s string) bool { return slices.Contains(f.racy, s) })
				w = slices.DeleteFunc(w, func(s string) bool { return slices.Contains(f.racy, s) })
				if !slices.Equal(g, w) {
					t.Errorf("%s no longer describes what Codex writes:\n got %s\nwant %s", name, strings.Join(g, " "), strings.Join(w, " "))
				}
			}
			if d != nil && *updateCodex {
				writeFixture(t, filepath.Join(dir, f.name+".rpc.jsonl"), scrubRPC(e, d.log))
			}
		})
	}
}

func fixtureName(name string, i int, ext string) string {
	if i == 0 {
		return name + ext
	}
	return fmt.Sprintf("%s.%d%s", name, i+1, ext)
}

func writeFixture(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Fixture conventions (as the hand-made samples in testdata/samples): the
// machine's folders become a fixed fake home, and the bulk the mapper never
// reads is cut: the 22 KB base instructions, the world_state snapshot and
// the developer messages' texts.
const (
	fakeHome        = "/home/user"
	cutInstructions = "You are Codex… (cut from the fixture)"
	cutDeveloper    = "(developer instructions cut from the fixture)"
	cutWorldState   = `{"cut":"the environment snapshot is cut from the fixture"}`
)

var (
	reBaseInstructions = regexp.MustCompile(`"base_instructions":\{"text":"(?:[^"\\]|\\.)*"`)
	reInputText        = regexp.MustCompile(`\{"type":"input_text","text":"(?:[^"\\]|\\.)*"`)
	reWorldPayload     = regexp.MustCompile(`"payload":.*\}$`)
)

// scrub replaces e's folders with the fake home's.
func scrub(e *codextest.Env, b []byte) []byte {
	for _, r := range [][2]string{
		{e.Project, fakeHome + "/proj"},
		{e.CodexHome, fakeHome + "/.codex"},
		{e.Tmp, "/tmp"},
		{e.Home, fakeHome},
		{e.Root, fakeHome},
	} {
		b = bytes.ReplaceAll(b, []byte(r[0]), []byte(r[1]))
	}
	return b
}

// scrubRollout scrubs a rollout and cuts its bulk, line by line.
func scrubRollout(e *codextest.Env, raw []byte) []byte {
	var out bytes.Buffer
	for _, line := range bytes.SplitAfter(scrub(e, raw), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		nl := bytes.HasSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\n"))
		var head struct {
			Type    string `json:"type"`
			Payload struct {
				Type string `json:"type"`
				Role string `json:"role"`
			} `json:"payload"`
		}
		_ = json.Unmarshal(line, &head)
		switch {
		case head.Type == "session_meta":
			line = reBaseInstructions.ReplaceAll(line, []byte(`"base_instructions":{"text":`+jsonString(cutInstructions)))
		case head.Type == "world_state":
			line = reWorldPayload.ReplaceAll(line, []byte(`"payload":`+cutWorldState+`}`))
		case head.Type == "response_item" && head.Payload.Type == "message" && head.Payload.Role == "developer":
			line = reInputText.ReplaceAll(line, []byte(`{"type":"input_text","text":`+jsonString(cutDeveloper)))
		}
		out.Write(line)
		if nl {
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// scrubRPC writes an app-server exchange as JSON lines, scrubbed.
func scrubRPC(e *codextest.Env, log []loggedMsg) []byte {
	var out bytes.Buffer
	for _, l := range log {
		b, _ := json.Marshal(l)
		out.Write(b)
		out.WriteByte('\n')
	}
	return scrub(e, out.Bytes())
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// shapes describes each record of a rollout by its kind: the record type,
// the payload's type, and the item type or message role where there is one
// ("event_msg/item_completed/AgentMessage", "response_item/message/user").
func shapes(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r struct {
			Type    string `json:"type"`
			Payload struct {
				Type string `json:"type"`
				Role string `json:"role"`
				Item struct {
					Type string `json:"type"`
				} `json:"item"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("not a rollout line: %v: %.200s", err, sc.Bytes())
		}
		s := r.Type
		if r.Payload.Type != "" {
			s += "/" + r.Payload.Type
		}
		if r.Payload.Role != "" {
			s += "/" + r.Payload.Role
		}
		if r.Payload.Item.Type != "" {
			s += "/" + r.Payload.Item.Type
		}
		out = append(out, s)
	}
	return out
}
