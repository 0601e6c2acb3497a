package launcher

import "testing"

// Local mode follows each thread of a Codex run only where it can tell the
// run's threads from another TUI's: on Linux, with the TUI's own app
// server (--no-daemon), or for codex exec (one thread); through the
// shared background server (the TUI's default), or on another system,
// only the first, and it says why.
func TestCodexFirstThreadOnly(t *testing.T) {
	for _, tc := range []struct {
		args []string
		goos string
		each bool
	}{
		{nil, "linux", false},
		{[]string{"--no-daemon"}, "linux", true},
		{[]string{"-m", "gpt-5.5", "--no-daemon", "resume", "01a21c00-53f4-7513-90cd-7879df4a4931"}, "linux", true},
		{[]string{"-c", "--no-daemon"}, "linux", false}, // a config value, not the option
		{[]string{"--", "--no-daemon"}, "linux", false}, // the prompt
		{[]string{"fix the bug", "--no-daemon"}, "linux", true},
		{[]string{"--no-daemon"}, "darwin", false},
		{[]string{"exec", "hello"}, "linux", true},
		{[]string{"exec", "hello"}, "windows", true},
	} {
		why := codexFirstThreadOnly(tc.args, tc.goos)
		if (why == "") != tc.each {
			t.Errorf("%q on %s: first thread only because %q, want each thread followed %v", tc.args, tc.goos, why, tc.each)
		}
	}
}
