package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --relay wins over $CCRELAY_RELAY, which wins over the remembered relay;
// with none of them, no relay.
func TestResolve(t *testing.T) {
	remembered := Config{Version: Version, Relay: "https://remembered.example"}
	for _, tc := range []struct {
		name, flag, env string
		cfg             Config
		want            string
		src             Source
	}{
		{"nothing", "", "", Config{}, "", FromNone},
		{"remembered", "", "", remembered, "https://remembered.example", FromConfig},
		{"env over remembered", "", "https://env.example", remembered, "https://env.example", FromEnv},
		{"env alone", "", "https://env.example", Config{}, "https://env.example", FromEnv},
		{"flag over env and remembered", "https://flag.example", "https://env.example", remembered, "https://flag.example", FromFlag},
		{"flag over remembered", "https://flag.example", "", remembered, "https://flag.example", FromFlag},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == EnvRelay {
					return tc.env
				}
				return ""
			}
			got, src := Resolve(tc.flag, getenv, tc.cfg)
			if got != tc.want || src != tc.src {
				t.Errorf("Resolve = %q, %q; want %q, %q", got, src, tc.want, tc.src)
			}
		})
	}
}

// The file is written 0600 whatever the umask, read back, kept apart from
// what Remember does not change; a missing file is no relay; a broken one
// or one of a newer version is refused with what to do.
func TestSaveLoad(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	c, err := Load(state)
	if err != nil || c != (Config{}) {
		t.Fatalf("missing file: %+v, %v", c, err)
	}
	if err := Remember(state, "https://relay.example", "/etc/ca.pem"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(Path(state))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v, %v", fi, err)
	}
	c, err = Load(state)
	if err != nil || c != (Config{Version: Version, Relay: "https://relay.example", CAFile: "/etc/ca.pem"}) {
		t.Fatalf("read back: %+v, %v", c, err)
	}
	if matches, _ := filepath.Glob(filepath.Join(state, "*")); len(matches) != 1 {
		t.Errorf("left beside it: %v", matches)
	}
	for _, tc := range []struct{ content, err string }{
		{`{"version":2,"relay":"https://x"}`, "update ccrelay"},
		{`{"version":1,`, "not valid JSON"},
		{strings.Repeat(" ", maxFile+1), "larger than"},
	} {
		if err := os.WriteFile(Path(state), []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(state); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Load(%.20q) = %v; want an error saying %q", tc.content, err, tc.err)
		}
	}
}
