package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

// Lists carry the agent a session runs, where they carry its model: a known
// agent only, its version cut short; an info without one (older CLIs) has
// none, which apps read as Claude Code. A daemon says which Codex it has.
func TestSummarizeAgent(t *testing.T) {
	for _, tc := range []struct {
		name        string
		info        map[string]any
		agent, vers string
	}{
		{"codex", map[string]any{"mode": "local", "model": "gpt-5.5", "agent": "codex", "agentVersion": "0.169.0"}, "codex", "0.169.0"},
		{"claude", map[string]any{"mode": "remote", "agent": "claude", "agentVersion": "2.1.330"}, "claude", "2.1.330"},
		{"older CLI", map[string]any{"mode": "local", "model": "opus"}, "", ""},
		{"unknown agent", map[string]any{"mode": "local", "agent": "gemini", "agentVersion": "1"}, "", ""},
		{"not a string", map[string]any{"mode": "local", "agent": 7}, "", ""},
		{"long version", map[string]any{"agent": "codex", "agentVersion": strings.Repeat("9", 500)}, "codex", strings.Repeat("9", maxAgentVersionBytes-4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, _ := json.Marshal(tc.info)
			var got struct {
				Agent        string `json:"agent"`
				AgentVersion string `json:"agentVersion"`
			}
			if err := json.Unmarshal(SummarizeInfo(raw), &got); err != nil {
				t.Fatal(err)
			}
			if got.Agent != tc.agent || !strings.HasPrefix(got.AgentVersion, tc.vers) || len(got.AgentVersion) > maxAgentVersionBytes {
				t.Fatalf("agent %q version %q; want %q %q", got.Agent, got.AgentVersion, tc.agent, tc.vers)
			}
		})
	}
	raw, _ := json.Marshal(map[string]any{"mode": "machine", "daemon": DaemonInfo{OS: "linux", ClaudeVersion: "2.1.330", CodexVersion: "0.169.0"}})
	var d struct{ Daemon DaemonInfo }
	if err := json.Unmarshal(SummarizeInfo(raw), &d); err != nil || d.Daemon.CodexVersion != "0.169.0" {
		t.Fatalf("daemon %+v %v", d.Daemon, err)
	}
}
