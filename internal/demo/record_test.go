package demo

// The bundled session is recorded from the real Claude Code: run
//
//	CCRELAY_TEST_CLAUDE=/path/to/claude go test ./internal/demo -run TestRecording -record
//
// to record it again. Claude works offline against internal/fakeapi, whose
// scripted answers below change a tiny Go CLI made in a scratch folder: it
// reads, searches, edits, runs `go test` and `go run` for real, keeps a task
// list, and has a background subagent review the diff. The scratch paths
// are rewritten to /home/dev/greet and /home/dev when saved.

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/replay"
)

var record = flag.Bool("record", false, "record the bundled demo session again from the real Claude Code")

// The paths the saved recording shows for the project and HOME.
const (
	shownProject = "/home/dev/greet"
	shownHome    = "/home/dev"
)

// prompt is what the user asks.
const prompt = "Add a --shout flag to greet that prints the greeting in upper case, and cover it with a test."

// project is the tiny CLI Claude changes.
var project = map[string]string{
	"go.mod": "module example.com/greet\n\ngo 1.26\n",
	"main.go": `// Command greet prints a greeting.
package main

import (
	"flag"
	"fmt"
)

func main() {
	name := flag.String("name", "world", "who to greet")
	flag.Parse()
	fmt.Println(greeting(*name))
}
`,
	"greet.go": `package main

import "fmt"

// greeting returns the line greet prints for name.
func greeting(name string) string {
	return fmt.Sprintf("Hello, %s!", name)
}
`,
	"greet_test.go": `package main

import "testing"

func TestGreeting(t *testing.T) {
	if got := greeting("Ada"); got != "Hello, Ada!" {
		t.Errorf("greeting(%q) = %q, want %q", "Ada", got, "Hello, Ada!")
	}
}
`,
}

// script is the model's side of the session, for a project at dir: the main
// agent's replies in order, then the reviewer's.
func script(dir string) []fakeapi.Rule {
	p := func(f string) string { return filepath.Join(dir, f) }
	type B = fakeapi.Block
	ctx := 14200 // context in use, growing as the session goes on
	// How long each of the main agent's replies takes, as a model would.
	delays := []time.Duration{7, 4, 5, 6, 4, 3, 6, 3, 4, 5, 8, 5}
	main := func(blocks ...B) fakeapi.Rule {
		ctx += 1300
		d := delays[0] * time.Second
		delays = delays[1:]
		return fakeapi.Rule{Agent: "main", Times: 1, Reply: blocks, Delay: d, Usage: &fakeapi.Usage{Input: 6, Output: 180, CacheRead: ctx, CacheCreation: 1300}}
	}
	task := func(subject, desc, active string) B {
		return fakeapi.ToolUse("TaskCreate", map[string]any{"subject": subject, "description": desc, "activeForm": active})
	}
	done := func(id string) B {
		return fakeapi.ToolUse("TaskUpdate", map[string]any{"taskId": id, "status": "completed"})
	}
	edit := func(file, old, new string) B {
		return fakeapi.ToolUse("Edit", map[string]any{"file_path": p(file), "old_string": old, "new_string": new})
	}
	rules := []fakeapi.Rule{
		main(fakeapi.Thinking("The user wants a `--shout` flag on greet. I need to see where flags are parsed and where the greeting string is built, change the function so it can upper-case its result, update every caller and extend the test. Then run the tests and try the flag for real."),
			fakeapi.Text("I'll add the flag, cover it with a test and run the suite. The plan:"),
			task("Add the --shout flag", "Parse a --shout bool flag in main and pass it to greeting", "Adding the --shout flag"),
			task("Test the shouted greeting", "Extend TestGreeting to cover shout on and off", "Testing the shouted greeting"),
			task("Run the tests", "go test ./... and try the flag with go run", "Running the tests")),
		main(fakeapi.Text("First, how greet is put together."),
			fakeapi.ToolUse("Read", map[string]any{"file_path": p("main.go")}),
			fakeapi.ToolUse("Read", map[string]any{"file_path": p("greet.go")})),
		main(fakeapi.Text("The line is built by `greeting()`. Before changing its signature, every caller:"),
			fakeapi.ToolUse("Grep", map[string]any{"pattern": `greeting\(`, "path": dir, "output_mode": "content", "-n": true})),
		main(fakeapi.Text("Two callers: `main` and `TestGreeting`. `greeting` gets a `shout` parameter:"),
			edit("greet.go", "import \"fmt\"\n\n// greeting returns the line greet prints for name.\nfunc greeting(name string) string {\n\treturn fmt.Sprintf(\"Hello, %s!\", name)\n}",
				"import (\n\t\"fmt\"\n\t\"strings\"\n)\n\n// greeting returns the line greet prints for name; shout puts it in\n// upper case.\nfunc greeting(name string, shout bool) string {\n\tg := fmt.Sprintf(\"Hello, %s!\", name)\n\tif shout {\n\t\treturn strings.ToUpper(g)\n\t}\n\treturn g\n}")),
		main(fakeapi.Text("Now the flag itself:"),
			edit("main.go", "\tname := flag.String(\"name\", \"world\", \"who to greet\")\n\tflag.Parse()\n\tfmt.Println(greeting(*name))",
				"\tname := flag.String(\"name\", \"world\", \"who to greet\")\n\tshout := flag.Bool(\"shout\", false, \"print the greeting in upper case\")\n\tflag.Parse()\n\tfmt.Println(greeting(*name, *shout))")),
		main(done("1"), fakeapi.ToolUse("Read", map[string]any{"file_path": p("greet_test.go")})),
		main(fakeapi.Text("The test becomes a table covering both cases:"),
			edit("greet_test.go", "func TestGreeting(t *testing.T) {\n\tif got := greeting(\"Ada\"); got != \"Hello, Ada!\" {\n\t\tt.Errorf(\"greeting(%q) = %q, want %q\", \"Ada\", got, \"Hello, Ada!\")\n\t}\n}",
				"func TestGreeting(t *testing.T) {\n\tfor _, tc := range []struct {\n\t\tname  string\n\t\tshout bool\n\t\twant  string\n\t}{\n\t\t{\"Ada\", false, \"Hello, Ada!\"},\n\t\t{\"Ada\", true, \"HELLO, ADA!\"},\n\t\t{\"world\", true, \"HELLO, WORLD!\"},\n\t} {\n\t\tif got := greeting(tc.name, tc.shout); got != tc.want {\n\t\t\tt.Errorf(\"greeting(%q, %v) = %q, want %q\", tc.name, tc.shout, got, tc.want)\n\t\t}\n\t}\n}")),
		main(done("2"), fakeapi.ToolUse("Bash", map[string]any{"command": "go vet ./... && go test -v ./...", "description": "Vet and run the tests"})),
		main(fakeapi.Text("All green. And the flag for real:"),
			fakeapi.ToolUse("Bash", map[string]any{"command": "go run . -name Ada -shout && go run . -name Ada", "description": "Try greet with and without --shout"})),
		main(done("3"),
			fakeapi.Text("Works. I'll have a reviewer look over the diff in the background."),
			fakeapi.ToolUse("Agent", map[string]any{"description": "Review the --shout change", "subagent_type": "general-purpose", "run_in_background": true,
				"prompt": "Review the uncommitted change in this Go repository (run `git diff`): it adds a --shout flag to the greet CLI. Check that it is correct, idiomatic and tested. Report problems briefly, or say that it looks good."})),
		main(fakeapi.Text("Done: `greet --shout` prints the greeting in upper case.\n\n" +
			"- `greet.go`: `greeting(name, shout)` upper-cases the line when `shout` is set.\n" +
			"- `main.go`: a `-shout` bool flag (off by default), passed to `greeting`.\n" +
			"- `greet_test.go`: `TestGreeting` is a table covering shout on and off.\n\n" +
			"`go vet` and `go test` pass, and `go run . -name Ada -shout` prints `HELLO, ADA!`. A reviewer is reading the diff in the background; I'll pass on what it finds.")),
		// The follow-up turn, once the reviewer's task notification arrives.
		main(fakeapi.Thinking("The reviewer approved the change and found nothing blocking; its one remark is optional. Summarise for the user."),
			fakeapi.Text("The review is back: the change is correct, idiomatic and covered by the test, nothing to fix. One optional idea from the reviewer: mention `-shout` in a README if greet gets one.\n\n"+
				"So `greet -shout` is ready to commit: 3 files changed, tests passing.")),
	}
	sub := fakeapi.Usage{Input: 4, Output: 150, CacheRead: 9800, CacheCreation: 600}
	rules = append(rules,
		fakeapi.Rule{Agent: "subagent", Times: 1, Usage: &sub, Delay: 4 * time.Second, Reply: []B{fakeapi.Text("I'll read the diff."),
			fakeapi.ToolUse("Bash", map[string]any{"command": "git diff --stat && git diff", "description": "Show the uncommitted change"})}},
		fakeapi.Rule{Agent: "subagent", Times: 1, Usage: &sub, Delay: 9 * time.Second, Reply: []B{fakeapi.Text("The `--shout` change looks good.\n\n" +
			"- **Correct**: `greeting` upper-cases the whole line only when `shout` is set; the default output is unchanged.\n" +
			"- **Idiomatic**: a `flag.Bool` with a clear usage string; `strings.ToUpper` on the built line.\n" +
			"- **Tested**: the table covers shout on and off, and both callers were updated.\n\n" +
			"Optional: mention `-shout` in a README if the project gets one. Nothing blocking.")}},
	)
	return rules
}

// TestRecording checks the bundled session (and, with -record, records it
// again first).
func TestRecording(t *testing.T) {
	if *record {
		recordSession(t)
	}
	checkRecording(t)
}

// recordSession runs the real Claude Code on the script and saves what it
// wrote in session/, replacing the bundled session.
func recordSession(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "greet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range project {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	gitEnv := []string{"GIT_AUTHOR_NAME=dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=dev", "GIT_COMMITTER_EMAIL=dev@example.com", "HOME=" + home}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"commit", "-q", "-m", "greet: a tiny CLI that prints a greeting"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), gitEnv...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	rules := script(dir)
	api, err := fakeapi.Start(rules...)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	e := &claudetest.Env{Claude: claudetest.Find(t), Home: home, Project: dir, API: api}
	cache, _ := exec.Command(gobin, "env", "GOCACHE").Output()
	env := append(e.Environ(), "PATH="+filepath.Dir(gobin)+":/usr/local/bin:/usr/bin:/bin", "GOCACHE="+strings.TrimSpace(string(cache)),
		"GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "CLAUDE_CODE_ENABLE_TODO_TOOLS=1")
	cmd := exec.Command(e.Claude, "-p", prompt, "--output-format", "stream-json", "--verbose",
		"--dangerously-skip-permissions", "--allowedTools", "Grep,TodoWrite")
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("claude: %v\n%s", err, out)
	}
	// Every request was answered by the script, each rule once.
	used := map[int]int{}
	for _, r := range api.Requests() {
		used[r.Rule]++
	}
	for i := range rules {
		if used[i] != 1 {
			t.Errorf("rule %d answered %d requests (requests: %+v)", i, used[i], api.Requests())
		}
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, `"is_error":true`) {
			t.Errorf("a tool failed: %.600s", l)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	src, err := claude.ProjectDir(filepath.Join(home, ".claude"), dir)
	if err != nil {
		t.Fatal(err)
	}
	mains, _ := filepath.Glob(filepath.Join(src, "*.jsonl"))
	if len(mains) != 1 {
		t.Fatalf("transcripts: %v", mains)
	}
	id := strings.TrimSuffix(filepath.Base(mains[0]), ".jsonl")
	subs, _ := filepath.Glob(filepath.Join(src, id, "subagents", "agent-*.jsonl"))
	if len(subs) != 1 {
		t.Fatalf("subagent transcripts: %v", subs)
	}
	rewrite := strings.NewReplacer(dir, shownProject, home, shownHome,
		claude.EscapeProjectPath(dir), claude.EscapeProjectPath(shownProject), "/claude-0/", "/claude-1000/")
	if err := os.RemoveAll("session"); err != nil {
		t.Fatal(err)
	}
	for from, to := range map[string]string{mains[0]: filepath.Join("session", id+".jsonl"), subs[0]: filepath.Join("session", "subagents", filepath.Base(subs[0]))} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, []byte(rewrite.Replace(string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("recorded session %s", id)
}

// recordLines decodes the bundled transcripts' lines.
func recordLines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, p := range []string{"session/*.jsonl", "session/subagents/*.jsonl"} {
		files, _ := filepath.Glob(p)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				out = append(out, m)
			}
		}
	}
	return out
}

// checkRecording replays the bundled session and checks that it shows the
// work the script describes, from Claude Code itself: thinking, a task
// list, reads, a search, edits with a diff, `go test` output, a background
// subagent that runs a tool and reports, and the follow-up turn; and that
// no scratch path is left in it.
func checkRecording(t *testing.T) {
	for _, m := range recordLines(t) {
		b, _ := json.Marshal(m)
		if s := string(b); strings.Contains(s, `"/tmp/`) || strings.Contains(s, "TestRecording") {
			t.Fatalf("a scratch path is left in the recording: %.300s", s)
		}
	}
	dir := t.TempDir()
	main, err := Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := replay.FindSession([]string{main})
	if err != nil {
		t.Fatal(err)
	}
	var envs []protocol.Envelope
	if _, err := replay.Run(t.Context(), s, replay.Options{}, func(e *protocol.Envelope) error {
		envs = append(envs, *e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tools := map[string]int{} // main agent's tool calls by name
	subTools := map[string]int{}
	results := map[string]string{} // call id -> result
	var edits, thinking, prompts, turns, subStarts, subTexts int
	for _, e := range envs {
		ev := e.Ev
		switch ev.T {
		case protocol.KindToolCallStart:
			if e.Subagent != "" {
				subTools[ev.Name]++
			} else {
				tools[ev.Name]++
			}
			var a map[string]any
			json.Unmarshal(ev.Args, &a)
			if ev.Name == "Edit" && a["old_string"] != "" && a["new_string"] != "" && strings.HasPrefix(a["file_path"].(string), shownProject+"/") {
				edits++
			}
		case protocol.KindToolCallEnd:
			if ev.Result != nil {
				results[ev.Call] += *ev.Result
			}
		case protocol.KindText:
			switch {
			case ev.Thinking:
				thinking++
			case e.Role == protocol.RoleUser && e.Subagent == "":
				prompts++
			case e.Subagent != "" && e.Role == protocol.RoleAgent:
				subTexts++
			}
		case protocol.KindTurnStart:
			turns++
		case protocol.KindStart:
			subStarts++
		}
	}
	all := strings.Join(mapValues(results), "\n")
	for name, min := range map[string]int{"TaskCreate": 3, "TaskUpdate": 3, "Read": 3, "Grep": 1, "Edit": 3, "Bash": 2} {
		if tools[name] < min {
			t.Errorf("%d %s calls, want at least %d (calls: %v)", tools[name], name, min, tools)
		}
	}
	if edits != 3 || thinking < 1 || prompts != 1 || turns != 1 || subStarts != 1 || subTools["Bash"] != 1 || subTexts < 2 {
		t.Errorf("edits %d, thinking %d, prompts %d, turns %d, subagents %d, subagent tools %v, subagent texts %d",
			edits, thinking, prompts, turns, subStarts, subTools, subTexts)
	}
	for _, want := range []string{"--- PASS: TestGreeting", "ok  \texample.com/greet", "HELLO, ADA!", "+\tshout := flag.Bool(", "greet.go:6:func greeting("} {
		if !strings.Contains(all, want) {
			t.Errorf("no tool result shows %q", want)
		}
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
