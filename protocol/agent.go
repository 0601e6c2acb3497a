package protocol

// The coding agents a session can run: its announced info's "agent", and
// the "agent" of a daemon's start command. An info without one (older
// CLIs) is Claude Code's.
const (
	AgentClaude = "claude"
	AgentCodex  = "codex"
)

// KnownAgent reports whether a names an agent ccrelay runs.
func KnownAgent(a string) bool { return a == AgentClaude || a == AgentCodex }

// maxAgentVersionBytes bounds the agent's version in a summary.
const maxAgentVersionBytes = 64
