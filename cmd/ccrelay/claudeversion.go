package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/protocol"
)

// checkClaudeVersion reads the version of the Claude Code at bin and, when
// it is newer than the newest version ccrelay was tested with, says so once:
// in the log and on notice. It returns the version ("" when it cannot be
// read) and the warning ("" for none); the app gets both in the session
// info.
func checkClaudeVersion(ctx context.Context, bin string, log *slog.Logger, notice io.Writer) (version, warning string) {
	v, err := claude.InstalledVersion(ctx, bin)
	if err != nil {
		log.Info("could not read Claude Code's version", "err", err)
		return "", ""
	}
	warning = claude.VersionWarning(v)
	if warning != "" {
		log.Warn(warning, "claudeVersion", v, "testedVersion", claude.TestedVersion)
		fmt.Fprintln(notice, "ccrelay: warning:", warning)
	}
	return v, warning
}

// sessionInfoWith is sessionInfo with the Claude Code version and the
// warning about it, if any.
func sessionInfoWith(cwd string, st launcher.SessionState, claudeVersion, versionWarning string) json.RawMessage {
	return sessionInfoFork(cwd, st, claudeVersion, versionWarning, "")
}

// sessionInfoFork is sessionInfoWith for a session forked from another
// (forkedFrom: the parent's id; "" for none).
func sessionInfoFork(cwd string, st launcher.SessionState, claudeVersion, versionWarning, forkedFrom string) json.RawMessage {
	return agentSessionInfo(cwd, st, protocol.AgentClaude, claudeVersion, versionWarning, forkedFrom)
}

// agentSessionInfo is the info of a session of agent (protocol.AgentClaude
// or protocol.AgentCodex) at version ("": not known). A Claude session
// says its version as claudeVersion too, as apps before agents read it.
func agentSessionInfo(cwd string, st launcher.SessionState, agent, version, versionWarning, forkedFrom string) json.RawMessage {
	host, _ := os.Hostname()
	claudeVersion := ""
	if agent == protocol.AgentClaude {
		claudeVersion = version
	}
	b, _ := json.Marshal(struct {
		Cwd            string `json:"cwd"`
		Machine        string `json:"machine"`
		Agent          string `json:"agent"`
		AgentVersion   string `json:"agentVersion,omitempty"`
		ClaudeVersion  string `json:"claudeVersion,omitempty"`
		VersionWarning string `json:"versionWarning,omitempty"`
		ForkedFrom     string `json:"forkedFrom,omitempty"`
		launcher.SessionState
	}{cwd, host, agent, version, claudeVersion, versionWarning, forkedFrom, st})
	return b
}
