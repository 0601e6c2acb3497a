package claude

import "testing"

// Claude Code names a project's folder the same way on every platform
// (every UTF-16 unit outside [A-Za-z0-9] becomes "-"), so Windows paths,
// drive letters, UNC shares and all, escape on any platform as they do on
// Windows.
func TestEscapeProjectPathWindows(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{`C:\Users\me\app`, "C--Users-me-app"},
		{`c:\Users\me\app`, "c--Users-me-app"}, // the case Windows gave is kept
		{`C:\Users\me\my app (2)`, "C--Users-me-my-app--2-"},
		{`D:\`, "D--"},
		{`\\server\share\app`, "--server-share-app"},
		{`\\?\C:\Users\me\app`, "----C--Users-me-app"},
		{`C:\Users\José\app`, "C--Users-Jos--app"},
		{`C:\Users\me\😀`, "C--Users-me---"}, // a surrogate pair is two units
		{`C:/Users/me/app`, "C--Users-me-app"},
	} {
		if got := EscapeProjectPath(tc.path); got != tc.want {
			t.Errorf("EscapeProjectPath(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}
