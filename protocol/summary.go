package protocol

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// Lists carry a bounded summary of each session's info, never the whole of
// it: the keys apps show, strings cut, the first permission requests with
// their inputs cut.
const (
	SummaryStringBytes = 1024     // a string of the summary
	SummaryPermissions = 8        // permission requests in a summary
	summaryInputBytes  = 2048     // a permission request's input in a summary
	summaryUsageBytes  = 1024     // the usage object in a summary
	MaxSummaryBytes    = 32 << 10 // what one session's summary can reach
	// MaxSealedInfoChars bounds a sealed summary (a summary sealed, in
	// base64url) that lists carry.
	MaxSealedInfoChars = ((MaxSummaryBytes+SealOverheadMax)*8 + 5) / 6
)

var summaryStrings = []string{"cwd", "title", "machine", "mode", "status", "model", "permissionMode", "error"}

// SummaryTurnCosts bounds the turn costs that lists carry (the last ones;
// launcher.MaxTurnCosts).
const SummaryTurnCosts = 64

// summaryTasks bounds the subagents' progress that lists carry.
const summaryTasks = 16

// SummarizeInfo is the bounded part of a session's announced info that the
// relay's lists carry.
func SummarizeInfo(info json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(info, &m) != nil {
		return json.RawMessage(`{}`)
	}
	out := map[string]any{}
	for _, k := range summaryStrings {
		var s string
		if json.Unmarshal(m[k], &s) != nil {
			continue
		}
		if k == "machine" {
			s = CleanName(s, 0) // a name: no bidirectional or other control
		}
		if s != "" {
			out[k] = clip(s, SummaryStringBytes)
		}
	}
	// The agent the session runs, where its model is (sealed with it):
	// only a known one; its version, short.
	var agent, agentVersion string
	if json.Unmarshal(m["agent"], &agent) == nil && KnownAgent(agent) {
		out["agent"] = agent
		if json.Unmarshal(m["agentVersion"], &agentVersion) == nil && agentVersion != "" {
			out["agentVersion"] = clip(agentVersion, maxAgentVersionBytes)
		}
	}
	// Sealed end to end: the whole summary, which the relay cannot read.
	var sealed string
	if json.Unmarshal(m["sealed"], &sealed) == nil && sealed != "" && len(sealed) <= MaxSealedInfoChars && isBase64URL(sealed) {
		out["sealed"] = sealed
	}
	// A recording replayed for show (ccrelay demo): only true is kept.
	var recording bool
	if json.Unmarshal(m["recording"], &recording) == nil && recording {
		out["recording"] = true
	}
	// A fork's parent: a session id, or left out.
	var parent string
	if json.Unmarshal(m["forkedFrom"], &parent) == nil && parent != "" && IsSessionID(parent) {
		out["forkedFrom"] = parent
	}
	// A session a machine's daemon started: the daemon's session, so that
	// apps offer to stop it there.
	var by string
	if json.Unmarshal(m["startedBy"], &by) == nil && by != "" && IsSessionID(by) {
		out["startedBy"] = by
	}
	// The session id its start command named, when it runs under another
	// (a new Codex thread: Codex chooses its thread's id): the app that
	// asked for it finds it by this.
	var as string
	if json.Unmarshal(m["startedAs"], &as) == nil && as != "" && IsSessionID(as) {
		out["startedAs"] = as
	}
	// A session that cannot go on (nothing can run it again: a Codex
	// thread Codex never wrote), and the session that took its place, a
	// session id or left out: apps offer no way to resume it.
	var ended bool
	if json.Unmarshal(m["ended"], &ended) == nil && ended {
		out["ended"] = true
		var next string
		if json.Unmarshal(m["continuedAs"], &next) == nil && next != "" && IsSessionID(next) {
			out["continuedAs"] = next
		}
	}
	// A machine's daemon: what it offers to start.
	if d := summarizeDaemon(m["daemon"]); d != nil {
		out["daemon"] = d
	}
	var cost float64
	if json.Unmarshal(m["costUsd"], &cost) == nil && m["costUsd"] != nil {
		out["costUsd"] = cost
	}
	if u := m["usage"]; len(u) > 0 && len(u) <= summaryUsageBytes && u[0] == '{' {
		out["usage"] = u
	}
	// The context window's use (remote mode): tokens used and the window.
	var cu struct {
		UsedTokens int64 `json:"usedTokens"`
		MaxTokens  int64 `json:"maxTokens"`
	}
	if json.Unmarshal(m["context"], &cu) == nil && cu.MaxTokens > 0 && cu.UsedTokens >= 0 {
		out["context"] = map[string]any{"usedTokens": cu.UsedTokens, "maxTokens": cu.MaxTokens}
	}
	// What each of the last turns cost (remote mode), bounded.
	var costs []struct {
		Turn string  `json:"turn"`
		USD  float64 `json:"usd"`
	}
	if json.Unmarshal(m["turnCosts"], &costs) == nil && len(costs) > 0 {
		list := []map[string]any{}
		for _, c := range costs[max(0, len(costs)-SummaryTurnCosts):] {
			if IsCuid(c.Turn) && c.USD >= 0 && c.USD < 1e6 {
				list = append(list, map[string]any{"turn": c.Turn, "usd": c.USD})
			}
		}
		out["turnCosts"] = list
	}
	// What the running subagents do now (remote mode), bounded.
	var tasks []struct {
		Subagent    string `json:"subagent"`
		Description string `json:"description"`
		LastTool    string `json:"lastTool"`
		Tokens      int64  `json:"tokens"`
		ToolUses    int64  `json:"toolUses"`
	}
	if json.Unmarshal(m["tasks"], &tasks) == nil && len(tasks) > 0 {
		list := []map[string]any{}
		for _, t := range tasks[:min(len(tasks), summaryTasks)] {
			if IsCuid(t.Subagent) {
				list = append(list, map[string]any{"subagent": t.Subagent, "description": clip(t.Description, 200),
					"lastTool": clip(t.LastTool, 64), "tokens": t.Tokens, "toolUses": t.ToolUses})
			}
		}
		out["tasks"] = list
	}
	// The rate limit's status, window and reset time (remote mode).
	var rl struct {
		Status        string   `json:"status"`
		ResetsAt      int64    `json:"resetsAt"`
		RateLimitType string   `json:"rateLimitType"`
		Utilization   *float64 `json:"utilization"`
	}
	if json.Unmarshal(m["rateLimit"], &rl) == nil && rl.Status != "" {
		out["rateLimit"] = map[string]any{"status": clip(rl.Status, 32), "resetsAt": rl.ResetsAt,
			"rateLimitType": clip(rl.RateLimitType, 64), "utilization": rl.Utilization}
	}
	var perms []map[string]json.RawMessage
	if json.Unmarshal(m["permissions"], &perms) == nil && perms != nil {
		list := []map[string]any{}
		for _, p := range perms[:min(len(perms), SummaryPermissions)] {
			q := map[string]any{}
			for _, k := range []string{"id", "tool", "description", "call", "subagent", "blockedPath"} {
				var s string
				if json.Unmarshal(p[k], &s) == nil && s != "" {
					q[k] = clip(s, SummaryStringBytes/4)
				}
			}
			var rules []string
			if json.Unmarshal(p["forSession"], &rules) == nil && len(rules) > 0 {
				rules = rules[:min(len(rules), 4)]
				for i := range rules {
					rules[i] = clip(rules[i], SummaryStringBytes/4)
				}
				q["forSession"] = rules
			}
			in, shrunk := shrinkInput(p["input"])
			if in != nil {
				q["input"] = in
			}
			// An input cut by the CLI (clipped) or here (inputCut) is not
			// the input asked: an app offers no edit of it (of the tool
			// call's args instead, when whole, for inputCut).
			if string(bytes.TrimSpace(p["clipped"])) == "true" {
				q["clipped"] = true
			}
			if string(bytes.TrimSpace(p["reasonRead"])) == "true" {
				q["reasonRead"] = true
			}
			if shrunk {
				q["inputCut"] = true
			}
			list = append(list, q)
		}
		out["permissions"] = list
	}
	b, _ := json.Marshal(out)
	return b
}

// shrinkInput keeps a tool input as is when it is small; otherwise only its
// top-level strings, cut, as far as summaryInputBytes allows (apps show the
// command or the path of a request, and a part of the rest); shrunk says
// that what it keeps is not the whole input.
func shrinkInput(in json.RawMessage) (_ any, shrunk bool) {
	in = bytes.TrimSpace(in)
	if len(in) == 0 || in[0] != '{' {
		return nil, len(in) > 0
	}
	if len(in) <= summaryInputBytes {
		return in, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(in, &m) != nil {
		return nil, true
	}
	out := map[string]string{}
	left := summaryInputBytes
	for _, k := range []string{"command", "file_path", "path", "pattern", "url", "description"} {
		var s string
		if json.Unmarshal(m[k], &s) != nil || s == "" || left <= len(k)+8 {
			continue
		}
		s = clip(s, min(left-len(k)-8, summaryInputBytes/2))
		out[k] = s
		left -= len(k) + len(s) + 8
	}
	return out, true
}

// Clip cuts s to at most n bytes on a rune boundary, ending with "…".
func Clip(s string, n int) string { return clip(s, n) }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := max(n-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// Bounds of a daemon's description in lists (DaemonInfo): the folders
// first (most recent first) as far as DaemonSummaryBytes allows, each with
// at most DaemonSessions past sessions.
const (
	DaemonFolders      = 256
	DaemonSessions     = 8
	DaemonRunning      = 64
	DaemonPromptBytes  = 160
	DaemonSummaryBytes = 24 << 10
)

// DaemonInfo is what a machine's daemon (`ccrelay daemon`) announces in
// its session's info under "daemon": the machine and what it may start.
type DaemonInfo struct {
	OS            string `json:"os"`
	Arch          string `json:"arch,omitempty"`
	ClaudeVersion string `json:"claudeVersion,omitempty"`
	// CodexVersion is the version of the Codex CLI the daemon can start
	// sessions of ("": none installed).
	CodexVersion string `json:"codexVersion,omitempty"`
	// AllowBypass: the app may choose bypassPermissions.
	AllowBypass bool `json:"allowBypass,omitempty"`
	// Roots are the folders under which any folder may be started (--allow).
	Roots []string `json:"roots,omitempty"`
	// Folders are the folders sessions may start in, most recent first.
	Folders []DaemonFolder `json:"folders"`
	// Running are the sessions the daemon runs now: the target of each
	// start and, for a new Codex thread, the id Codex gave the thread too.
	Running []string `json:"running,omitempty"`
	// Threads maps the target of a start the daemon runs to the id of
	// the session it runs as, where that is another (a new Codex thread:
	// Codex chooses its id), as the session told the daemon.
	Threads map[string]string `json:"threads,omitempty"`
}

// DaemonFolder is a folder a daemon may start sessions in, with its past
// Claude Code sessions (most recent first).
type DaemonFolder struct {
	Dir      string        `json:"dir"`
	At       int64         `json:"at,omitempty"` // Unix ms of the last session
	Sessions []PastSession `json:"sessions,omitempty"`
}

// PastSession is one of Claude Code's sessions or Codex's threads on disk,
// to resume.
type PastSession struct {
	ID     string `json:"id"`
	Prompt string `json:"prompt,omitempty"` // its first prompt, cut
	At     int64  `json:"at,omitempty"`     // Unix ms of its last change
	// Agent is the agent whose session it is (AgentCodex; "": Claude
	// Code's): a resume of it starts with this agent.
	Agent string `json:"agent,omitempty"`
}

// summarizeDaemon bounds a daemon's description: fields cut, lists capped,
// folders kept as far as DaemonSummaryBytes allows. nil when raw is none.
func summarizeDaemon(raw json.RawMessage) *DaemonInfo {
	var d DaemonInfo
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &d) != nil {
		return nil
	}
	out := &DaemonInfo{OS: clip(d.OS, 32), Arch: clip(d.Arch, 32), ClaudeVersion: clip(d.ClaudeVersion, 64),
		CodexVersion: clip(d.CodexVersion, 64), AllowBypass: d.AllowBypass,
		Folders: []DaemonFolder{}}
	for _, r := range d.Roots[:min(len(d.Roots), 16)] {
		out.Roots = append(out.Roots, clip(r, SummaryStringBytes))
	}
	for _, id := range d.Running[:min(len(d.Running), DaemonRunning)] {
		if IsSessionID(id) {
			out.Running = append(out.Running, id)
		}
	}
	for target, thread := range d.Threads {
		if len(out.Threads) < DaemonRunning && IsSessionID(target) && IsSessionID(thread) &&
			slices.Contains(out.Running, target) && slices.Contains(out.Running, thread) {
			if out.Threads == nil {
				out.Threads = map[string]string{}
			}
			out.Threads[target] = thread
		}
	}
	size := 512 + 64*len(out.Running) + 80*len(out.Threads)
	for _, r := range out.Roots {
		size += len(r) + 8
	}
	for _, f := range d.Folders[:min(len(d.Folders), DaemonFolders)] {
		if f.Dir == "" {
			continue
		}
		g := DaemonFolder{Dir: clip(f.Dir, SummaryStringBytes), At: f.At}
		for _, p := range f.Sessions[:min(len(f.Sessions), DaemonSessions)] {
			if IsSessionID(p.ID) {
				agent := ""
				if p.Agent == AgentCodex {
					agent = AgentCodex
				}
				g.Sessions = append(g.Sessions, PastSession{ID: p.ID, Prompt: clip(p.Prompt, DaemonPromptBytes), At: p.At, Agent: agent})
			}
		}
		b, _ := json.Marshal(g)
		if size+len(b)+1 > DaemonSummaryBytes {
			break
		}
		size += len(b) + 1
		out.Folders = append(out.Folders, g)
	}
	return out
}
