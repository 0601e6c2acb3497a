package launcher

import (
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
)

func TestRemoteAndResumeArgs(t *testing.T) {
	for _, tc := range []struct {
		user, remote, resume []string
	}{
		{[]string{"--session-id", "S", "--permission-mode", "plan", "--model=opus"},
			[]string{"--permission-mode", "plan", "--model=opus"},
			[]string{"--permission-mode", "plan", "--model=opus"}},
		{[]string{"--resume", "S", "--allowedTools", "Bash(go test:*)", "Read", "--verbose", "fix it"},
			[]string{"--allowedTools", "Bash(go test:*)", "Read"},
			[]string{"--allowedTools", "Bash(go test:*)", "Read", "--verbose"}},
		{[]string{"-c", "--add-dir", "../lib", "--mcp-config", "m.json", "--settings", "s.json", "--disallowed-tools", "Write", "--", "a prompt"},
			[]string{"--add-dir", "../lib", "--mcp-config", "m.json", "--settings", "s.json", "--disallowed-tools", "Write"},
			[]string{"--add-dir", "../lib", "--mcp-config", "m.json", "--settings", "s.json", "--disallowed-tools", "Write"}},
		{[]string{"-r", "--dangerously-skip-permissions", "hello"},
			nil,
			[]string{"--dangerously-skip-permissions"}},
	} {
		if got := RemoteArgs(tc.user); !slices.Equal(got, tc.remote) {
			t.Errorf("RemoteArgs(%q) = %q, want %q", tc.user, got, tc.remote)
		}
		if got := ResumeArgs(tc.user); !slices.Equal(got, tc.resume) {
			t.Errorf("ResumeArgs(%q) = %q, want %q", tc.user, got, tc.resume)
		}
	}
	// What the app set since wins over the user's option.
	if got := RemoteArgs([]string{"--model", "opus", "--permission-mode", "plan"}, "--model"); !slices.Equal(got, []string{"--permission-mode", "plan"}) {
		t.Errorf("%q", got)
	}
}

// TakeSettings removes every --settings and returns the last one's value,
// leaving everything after -- alone.
func TestTakeSettings(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		value string
		rest  []string
	}{
		{nil, "", nil},
		{[]string{"--model", "opus"}, "", []string{"--model", "opus"}},
		{[]string{"--settings", "a.json", "-c"}, "a.json", []string{"-c"}},
		{[]string{"--settings={}", "--settings", "b.json", "-p", "hi"}, "b.json", []string{"-p", "hi"}},
		{[]string{"-c", "--", "--settings", "x"}, "", []string{"-c", "--", "--settings", "x"}},
	} {
		v, rest := TakeSettings(tc.args)
		if v != tc.value || !slices.Equal(rest, tc.rest) {
			t.Errorf("TakeSettings(%q) = %q, %q; want %q, %q", tc.args, v, rest, tc.value, tc.rest)
		}
	}
}

func TestForkParent(t *testing.T) {
	const id = "11111111-2222-4333-8444-555555555555"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--resume", id, "--fork-session"}, id},
		{[]string{"--fork-session", "--resume=" + id}, id},
		{[]string{"-r", id, "--fork-session", "--model", "opus"}, id},
		{[]string{"--resume", id}, ""},
		{[]string{"--continue", "--fork-session"}, ""},
		{[]string{"--resume", "not-a-uuid", "--fork-session"}, ""},
		{[]string{"--fork-session"}, ""},
		{[]string{"--", "--resume", id, "--fork-session"}, ""},
	} {
		if got := ForkParent(tc.args); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestRemoteResumeTarget(t *testing.T) {
	const id = "11111111-2222-4333-8444-555555555555"
	for _, tc := range []struct {
		args []string
		want string
		err  bool
	}{
		{nil, "", false},
		{[]string{"--model", "opus"}, "", false},
		{[]string{"--resume", id}, id, false},
		{[]string{"--resume=" + id, "--model", "opus"}, id, false},
		{[]string{"-r", id}, id, false},
		{[]string{"--resume"}, "", true},
		{[]string{"--resume", "--model", "opus"}, "", true},
		{[]string{"--resume", "my old session"}, "", true},
		{[]string{"--resume", id, "--fork-session"}, "", true},
		{[]string{"--continue"}, "", true},
		{[]string{"-c"}, "", true},
		{[]string{"--", "--resume", id}, "", false},
	} {
		got, err := RemoteResumeTarget(tc.args)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%q: %q, %v; want %q (error %v)", tc.args, got, err, tc.want, tc.err)
		}
	}
}

// A forking command line gets the fork's id: the user's --session-id, or a
// new one added in front; any other command line is left as it is.
func TestForkSessionArgs(t *testing.T) {
	const parent, mine = "11111111-2222-4333-8444-555555555555", "66666666-7777-4888-9999-000000000000"
	for _, tc := range []struct {
		args  []string
		added bool   // a new --session-id is added
		fork  string // the user's, when not added
	}{
		{args: []string{"--resume", parent, "--fork-session"}, added: true},
		{args: []string{"--fork-session", "-r=" + parent, "--model", "opus"}, added: true},
		{args: []string{"--continue", "--fork-session"}, added: true},
		{args: []string{"-c", "--fork-session", "--", "a prompt"}, added: true},
		{args: []string{"--resume", parent, "--fork-session", "--session-id", mine}, fork: mine},
		{args: []string{"--session-id=" + mine, "--fork-session", "--resume", parent}, fork: mine},
		{args: []string{"--resume", parent}},
		{args: []string{"--fork-session"}},
		{args: []string{"--session-id", mine}},
		{args: []string{"--", "--resume", parent, "--fork-session"}},
		{args: nil},
	} {
		out, fork := ForkSessionArgs(tc.args)
		switch {
		case tc.added:
			if !ValidSessionID(fork) || fork == parent || !slices.Equal(out, append([]string{"--session-id=" + fork}, tc.args...)) {
				t.Errorf("%q: %q, fork %q: want a new --session-id in front", tc.args, out, fork)
			}
		default:
			if fork != tc.fork || !slices.Equal(out, tc.args) {
				t.Errorf("%q: %q, fork %q: want the args as they are, fork %q", tc.args, out, fork, tc.fork)
			}
		}
	}
	a, _ := ForkSessionArgs([]string{"--continue", "--fork-session"})
	b, _ := ForkSessionArgs([]string{"--continue", "--fork-session"})
	if a[0] == b[0] {
		t.Fatalf("two forks got the same id %q", a[0])
	}
}

// The first SessionStart of a forking run that names the resumed session
// (Claude Code 2.1.197) is taken as the fork's, its transcript beside the
// reported one; a start that names the fork, and every later start, pass
// as they are.
func TestForkSessionStart(t *testing.T) {
	const parent, fork, cleared = "11111111-2222-4333-8444-555555555555", "66666666-7777-4888-9999-000000000000", "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
	dir := filepath.Join("home", "projects", "p")
	at := func(id string) string { return filepath.Join(dir, id+".jsonl") }
	for _, tc := range []struct {
		name   string
		fork   string
		starts []SessionStart
		want   []SessionStart
	}{
		{"2.1.197 names the parent", fork,
			[]SessionStart{{SessionID: parent, TranscriptPath: at(parent), Source: "resume"}, {SessionID: cleared, TranscriptPath: at(cleared), Source: "clear"}},
			[]SessionStart{{SessionID: fork, TranscriptPath: at(fork), Source: "resume"}, {SessionID: cleared, TranscriptPath: at(cleared), Source: "clear"}}},
		{"no transcript path", fork,
			[]SessionStart{{SessionID: parent, Source: "resume"}},
			[]SessionStart{{SessionID: fork, Source: "resume"}}},
		{"2.1.330 names the fork", fork,
			[]SessionStart{{SessionID: fork, TranscriptPath: at(fork), Source: "fork"}, {SessionID: parent, TranscriptPath: at(parent), Source: "resume"}},
			[]SessionStart{{SessionID: fork, TranscriptPath: at(fork), Source: "fork"}, {SessionID: parent, TranscriptPath: at(parent), Source: "resume"}}},
		{"not a fork", "",
			[]SessionStart{{SessionID: parent, TranscriptPath: at(parent), Source: "resume"}},
			[]SessionStart{{SessionID: parent, TranscriptPath: at(parent), Source: "resume"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []SessionStart
			on := forkSessionStart(tc.fork, func(s SessionStart) { got = append(got, s) }, slog.New(slog.NewTextHandler(io.Discard, nil)))
			for _, s := range tc.starts {
				on(s)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
