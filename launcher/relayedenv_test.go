package launcher

import (
	"slices"
	"testing"
)

// Every Claude ccrelay runs has the mark that ccrelay follows its session
// (once, whatever the environment held), and none of ccrelay's variables.
func TestClaudeEnvMarksRelayed(t *testing.T) {
	for _, env := range [][]string{
		{"HOME=/h", "CCRELAY_TOKEN=secret"},
		{"HOME=/h", EnvRelayed + "=1"},
		{EnvRelayed + "=0", "HOME=/h"},
	} {
		got := claudeEnv(env)
		n := 0
		for _, kv := range got {
			if kv == EnvRelayed+"=1" {
				n++
			} else if len(kv) >= len(EnvRelayed) && kv[:len(EnvRelayed)] == EnvRelayed {
				t.Errorf("claudeEnv(%q) kept %q", env, kv)
			}
		}
		if n != 1 || !slices.Contains(got, "HOME=/h") || slices.Contains(got, "CCRELAY_TOKEN=secret") {
			t.Errorf("claudeEnv(%q) = %q; want HOME, %s=1 once, no CCRELAY_ variable", env, got, EnvRelayed)
		}
	}
}
