package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/internal/synth"
)

var binary string

func TestMain(m *testing.M) {
	// Listing the tests (go test -list, which internal/gotest runs to split
	// the package) needs no binary.
	flag.Parse()
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "ccrelay-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "ccrelay")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		os.Stderr.Write(out)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	res := result{stdout: so.String(), stderr: se.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	if strings.Contains(res.stderr, "goroutine ") || strings.Contains(res.stderr, "panic") {
		t.Fatalf("stack trace on stderr:\n%s", res.stderr)
	}
	return res
}

const corpus = "../../testdata/corpus"

func write(t *testing.T, name string, data []byte) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Bad input gets a clear message and a non-zero exit only when nothing could
// be read; never a panic.
func TestReplayBadInput(t *testing.T) {
	dir := t.TempDir()
	good := `{"type":"user","uuid":"u1","message":{"role":"user","content":"hi"}}` + "\n"
	huge := append(append([]byte(`{"type":"user","uuid":"u2","message":{"content":"`), bytes.Repeat([]byte("x"), 50<<20)...), []byte(`"}}`+"\n")...)
	tests := []struct {
		name     string
		path     string
		code     int
		stderr   string
		envelope bool
	}{
		{"missing file", filepath.Join(dir, "nope.jsonl"), 1, "open " + filepath.Join(dir, "nope.jsonl") + ": no such file or directory", false},
		{"directory", dir, 1, dir + " is a directory, not a transcript", false},
		{"binary junk", write(t, "junk.jsonl", []byte{0x7f, 'E', 'L', 'F', 0, 1, 2, 3, 0xff, 0xfe, '\n', 0, 0}), 1, "junk.jsonl is not a Claude Code transcript: none of its lines is a JSON record (line 1: binary data, not JSON)", false},
		{"a text file without .jsonl (like /etc/passwd)", write(t, "passwd", []byte("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n")), 1, "passwd is not a Claude Code transcript: none of its lines is a JSON record (line 1: invalid JSON)", false},
		{"a binary without .jsonl", write(t, "prog", []byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0}), 1, "prog is not a Claude Code transcript: its only line is not a JSON record (line 1: binary data, not JSON)", false},
		{"empty file", write(t, "empty.jsonl", nil), 1, "empty.jsonl is empty: nothing to replay", false},
		{"truncated last line", write(t, "trunc.jsonl", []byte(good+`{"type":"assistant","uuid":"a1","message":{"content":[{"type":"te`)), 0, "last line is incomplete", true},
		{"50 MB single line", write(t, "huge.jsonl", huge), 1, "longer than the 16.0 MiB limit", false},
		{"50 MB line among good ones", write(t, "huge2.jsonl", append([]byte(good), huge...)), 0, "longer than the 16.0 MiB limit", true},
		{"not JSONL at all", corpus + "/happy-fixtures/duplicate-assistant-response-2.jsonl", 1, "duplicate-assistant-response-2.jsonl is not a Claude Code transcript", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, "replay", "--format", "jsonl", tt.path)
			if res.code != tt.code {
				t.Fatalf("exit %d, want %d\nstderr: %s", res.code, tt.code, res.stderr)
			}
			if !strings.Contains(res.stderr, tt.stderr) {
				t.Fatalf("stderr lacks %q:\n%s", tt.stderr, res.stderr)
			}
			if tt.envelope != strings.Contains(res.stdout, `"ev":`) {
				t.Fatalf("stdout: %q", res.stdout)
			}
			// When nothing could be read, the error alone: no summary of
			// zero counts before it.
			if tt.code != 0 && (!strings.HasPrefix(res.stderr, "ccrelay: ") || strings.Count(res.stderr, "\n") != 1) {
				t.Fatalf("want the error alone on stderr, got:\n%s", res.stderr)
			}
		})
	}
	// With the huge line accepted by a larger limit the record is read.
	res := run(t, "replay", "--format", "jsonl", "--max-line", "64000000", write(t, "huge3.jsonl", huge))
	if res.code != 0 || !strings.Contains(res.stdout, `"claudeUuid":"u2"`) {
		t.Fatalf("exit %d stderr %s", res.code, res.stderr)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

const agentBackground = corpus + "/claude-code-2.1.330/agent-background/transcripts/-home-dev-project/fc141a3b-db42-42fd-b003-09c712c8bbfd.jsonl"

func TestReplayFormats(t *testing.T) {
	a := run(t, "replay", agentBackground)
	b := run(t, "replay", "--format", "jsonl", agentBackground)
	if a.code != 0 || a.stdout != b.stdout || strings.Count(a.stdout, "\n") != 11 {
		t.Fatalf("jsonl default on a pipe: exit %d\n%s", a.code, a.stdout)
	}
	for _, want := range []string{"read 57 records from 2 file(s)", "wrote 11 envelopes", "1 turn, 1 subagent", "attachment 22"} {
		if !strings.Contains(a.stderr, want) {
			t.Errorf("summary lacks %q:\n%s", want, a.stderr)
		}
	}
	chat := run(t, "replay", "--format", "chat", "--color", "never", agentBackground)
	for _, want := range []string{"› SPAWN a helper", "┌ Agent: Count files", "│ ⚙ Bash List files in the subagent", "│ ⎿ a.txt", "└ Count files done", "⚑ Agent “Count files” completed", "… turn still open"} {
		if !strings.Contains(chat.stdout, want) {
			t.Errorf("chat lacks %q:\n%s", want, chat.stdout)
		}
	}
	if strings.Contains(chat.stdout, "\x1b[") {
		t.Error("color with --color never")
	}
	colored := run(t, "replay", "--format", "chat", "--color", "always", agentBackground)
	if !strings.Contains(colored.stdout, "\x1b[2m") {
		t.Error("no dim style for thinking/meta with --color always")
	}
	if res := run(t, "replay", "--format", "xml", agentBackground); res.code == 0 || !strings.Contains(res.stderr, "unknown --format") {
		t.Fatalf("bad format accepted: %+v", res)
	}
	q := run(t, "replay", "-q", agentBackground)
	if q.stderr != "" {
		t.Fatalf("--quiet printed %q", q.stderr)
	}
}

// Skipped lines are reported with file:line; an explicit list of files is
// merged in timestamp order.
func TestReplaySkipsAndExplicitFiles(t *testing.T) {
	res := run(t, "replay", "-v", corpus+"/public/claude-code-log/test/test_data/edge_cases.jsonl")
	if res.code != 0 || !strings.Contains(res.stderr, "edge_cases.jsonl:13: JSON value is not an object") {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	// The resumed session's file repeats the first session's records with
	// the same uuids: read together, they are deduplicated.
	both := run(t, "replay", corpus+"/happy-fixtures/1-continue-run-ls-tool.jsonl", corpus+"/happy-fixtures/0-say-lol-session.jsonl")
	if both.code != 0 || !strings.Contains(both.stderr, "from 2 file(s)") || !strings.Contains(both.stderr, "2 duplicates dropped") {
		t.Fatalf("exit %d\n%s", both.code, both.stderr)
	}
}

// Memory stays bounded: a 200 MB synthetic transcript replays with a peak
// RSS of at most 32 MB (replay.BenchmarkReplayPeakRSS measures 1 GB).
func TestReplayMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 200 MB file")
	}
	var sources []synth.Source
	for _, p := range []string{
		"/public/spotter/test/fixtures/transcripts/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
		"/public/spotter/test/fixtures/transcripts/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl",
		"/public/claude-code-log/test/test_data/real_projects/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl",
		"/public/claude-code-viewer/mock-global-claude-dir/projects/sample-project/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
		"/claude-code-2.1.330/agent-background/transcripts/-home-dev-project/fc141a3b-db42-42fd-b003-09c712c8bbfd.jsonl",
	} {
		s, err := synth.Load(corpus + p)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, s)
	}
	path := filepath.Join(t.TempDir(), "big.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := synth.Write(f, 200<<20, sources...)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, "replay", "--format", "jsonl", path)
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	lines := strings.Count(res.stdout, "\n")
	// The child reports its own peak RSS (VmHWM); the rusage of a child
	// started with vfork also counts the parent's pages.
	m := regexp.MustCompile(`peak memory ([0-9.]+) MB`).FindStringSubmatch(res.stderr)
	if m == nil {
		t.Fatalf("no peak memory in the summary:\n%s", res.stderr)
	}
	peak, _ := strconv.ParseFloat(m[1], 64)
	t.Logf("replayed %d MB into %d envelopes; peak memory %.1f MB", n>>20, lines, peak)
	if lines < 20000 {
		t.Fatalf("only %d envelopes from %d MB", lines, n>>20)
	}
	if peak <= 0 || peak > 32 {
		t.Fatalf("peak RSS %.1f MB, want at most 32 MB", peak)
	}
}
