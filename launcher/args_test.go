package launcher

import (
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
