package dirs

import (
	"errors"
	"path/filepath"
	"runtime"
	"testing"
)

func env(goos, home string, vars map[string]string) Env {
	return Env{GOOS: goos, Home: home, Getenv: func(k string) string { return vars[k] }}
}

func TestFolders(t *testing.T) {
	for _, tc := range []struct {
		name                string
		env                 Env
		state, data, claude string
	}{
		{"linux", env("linux", "/home/me", nil),
			"/home/me/.local/state/ccrelay", "/home/me/.local/share/ccrelay", "/home/me/.claude"},
		{"linux XDG", env("linux", "/home/me", map[string]string{"XDG_STATE_HOME": "/x/state/", "XDG_DATA_HOME": "/x/data", "CLAUDE_CONFIG_DIR": "/c"}),
			"/x/state/ccrelay", "/x/data/ccrelay", "/c"},
		{"darwin", env("darwin", "/Users/me", nil),
			"/Users/me/.local/state/ccrelay", "/Users/me/.local/share/ccrelay", "/Users/me/.claude"},
		{"windows", env("windows", `C:\Users\me`, map[string]string{"LocalAppData": `C:\Users\me\AppData\Local`}),
			`C:\Users\me\AppData\Local\ccrelay\state`, `C:\Users\me\AppData\Local\ccrelay\data`, `C:\Users\me\.claude`},
		{"windows, no LocalAppData", env("windows", `C:\Users\me`, nil),
			`C:\Users\me\AppData\Local\ccrelay\state`, `C:\Users\me\AppData\Local\ccrelay\data`, `C:\Users\me\.claude`},
		{"windows ignores XDG", env("windows", `C:\Users\me`, map[string]string{"LocalAppData": `D:\Local\`, "XDG_STATE_HOME": `C:\x`}),
			`D:\Local\ccrelay\state`, `D:\Local\ccrelay\data`, `C:\Users\me\.claude`},
		{"windows UNC profile", env("windows", `\\server\profiles\me`, nil),
			`\\server\profiles\me\AppData\Local\ccrelay\state`, `\\server\profiles\me\AppData\Local\ccrelay\data`, `\\server\profiles\me\.claude`},
		{"windows CLAUDE_CONFIG_DIR", env("windows", `C:\Users\me`, map[string]string{"CLAUDE_CONFIG_DIR": `D:\claude`}),
			`C:\Users\me\AppData\Local\ccrelay\state`, `C:\Users\me\AppData\Local\ccrelay\data`, `D:\claude`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := State(tc.env)
			if err != nil || st != tc.state {
				t.Errorf("State = %q, %v; want %q", st, err, tc.state)
			}
			d, err := Data(tc.env)
			if err != nil || d != tc.data {
				t.Errorf("Data = %q, %v; want %q", d, err, tc.data)
			}
			if c := Claude(tc.env); c != tc.claude {
				t.Errorf("Claude = %q; want %q", c, tc.claude)
			}
		})
	}
}

func TestNoHome(t *testing.T) {
	for _, goos := range []string{"linux", "darwin", "windows"} {
		if _, err := State(env(goos, "", nil)); !errors.Is(err, ErrNoHome) {
			t.Errorf("%s: State without home: %v", goos, err)
		}
		if _, err := Data(env(goos, "", nil)); !errors.Is(err, ErrNoHome) {
			t.Errorf("%s: Data without home: %v", goos, err)
		}
	}
}

// Join agrees with filepath.Join on this platform.
func TestJoinMatchesFilepath(t *testing.T) {
	for _, elems := range [][]string{{"/a", "b"}, {"/a/", "/b/", "c"}, {"a", ".local/state", "ccrelay"}} {
		if got, want := Join(runtime.GOOS, elems...), filepath.Join(elems...); got != want {
			t.Errorf("Join(%q) = %q, filepath.Join = %q", elems, got, want)
		}
	}
}
