package mapper

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
)

// Codex's tools as the app shows them.
const (
	codexExec  = "exec_command" // unified exec: a shell command
	codexPatch = "apply_patch"  // a freeform patch
	// CodexShellName is the tool name an exec_command call gets: the app
	// shows it as it shows Claude's Bash (the command, its output, its exit
	// code).
	CodexShellName = "Bash"
)

// toolCall maps a function_call or custom_tool_call to tool-call-start.
func (c *Codex) toolCall(r *codex.Record, it *codex.ResponseItem) {
	m := c.Mapper
	c.ensureTurn(r)
	call := it.CallID
	if call == "" {
		call = protocol.DeriveID(m.session, c.turnKey, "call", lineKey(r))
	}
	name := it.Name
	if it.Namespace != "" {
		name = it.Namespace + "." + name
	}
	if name == "" {
		name = "unknown"
	}
	name, _ = Preview(name, protocol.MaxDetailBytes)
	var args json.RawMessage
	title := name + " call"
	desc := title
	switch {
	case it.Type == codex.ItemFunctionCall && it.Name == codexExec && it.Namespace == "":
		args, title, desc = execArgs(it.Arguments)
		name = CodexShellName
	case it.Type == codex.ItemCustomToolCall && it.Name == codexPatch:
		p, _ := codex.ParsePatch(it.Input)
		c.patches[call] = p
		title = patchTitle(p)
		desc = title
		args = toolArgs(mustJSON(map[string]any{"input": it.Input, "files": patchFiles(p)}))
	case it.Type == codex.ItemCustomToolCall:
		args = toolArgs(mustJSON(map[string]string{"input": it.Input}))
	default:
		args = toolArgs(json.RawMessage(it.Arguments))
		if d := decodeInput(args).str("description"); strings.TrimSpace(d) != "" {
			title = toolTitle(name, decodeInput(args))
			desc = title
		}
	}
	c.kinds[call] = name
	m.started(call, "", false)
	c.trimCalls()
	m.emitOwn(protocol.RoleAgent, protocol.DeriveID(m.session, c.turnKey, "call", call, "start"), nil, "",
		protocol.Event{T: protocol.KindToolCallStart, Call: call, Name: name, Title: title, Description: desc, Args: args})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

// execArgs is an exec_command call's args as the app's Bash card reads
// them: "command" (Codex's "cmd") and "description" (the model's
// justification, when it gave one), beside Codex's other arguments.
func execArgs(arguments string) (json.RawMessage, string, string) {
	in := decodeInput(json.RawMessage(arguments))
	if in == nil {
		return toolArgs(json.RawMessage(arguments)), CodexShellName + " call", CodexShellName + " call"
	}
	cmd := in.str("cmd")
	if cmd == "" {
		cmd = in.str("command")
	}
	out := map[string]json.RawMessage{}
	for k, v := range in {
		if k != "cmd" {
			out[k] = v
		}
	}
	out["command"] = mustJSON(cmd)
	title := oneLineTitle(cmd)
	desc := title
	if j := strings.TrimSpace(in.str("justification")); j != "" {
		out["description"] = mustJSON(j)
		desc = oneLineTitle(j)
	}
	if title == "" {
		title = CodexShellName + " call"
	}
	if desc == "" {
		desc = title
	}
	return toolArgs(mustJSON(out)), title, desc
}

// oneLineTitle is s on one line, cut as toolTitle cuts a description.
func oneLineTitle(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return ""
	}
	return toolTitle("", input{"description": mustJSON(s)})
}

// patchTitle names the files a patch changes: "Edit a.go", "Add b.go",
// "Edit 3 files".
func patchTitle(p codex.Patch) string {
	switch len(p.Files) {
	case 0:
		return codexPatch + " call"
	case 1:
		f := p.Files[0]
		verb := map[string]string{codex.PatchAdd: "Add", codex.PatchDelete: "Delete", codex.PatchUpdate: "Edit"}[f.Op]
		if f.MoveTo != "" {
			return oneLineTitle(verb + " " + f.Path + " → " + f.MoveTo)
		}
		return oneLineTitle(verb + " " + f.Path)
	}
	return "Edit " + strconv.Itoa(len(p.Files)) + " files"
}

type patchFile struct {
	Op     string `json:"op"`
	Path   string `json:"path"`
	MoveTo string `json:"moveTo,omitempty"`
}

func patchFiles(p codex.Patch) []patchFile {
	out := make([]patchFile, 0, len(p.Files))
	for _, f := range p.Files {
		out = append(out, patchFile{Op: f.Op, Path: f.Path, MoveTo: f.MoveTo})
	}
	return out
}

// toolOutput maps a function_call_output or custom_tool_call_output to
// tool-call-end.
func (c *Codex) toolOutput(r *codex.Record, it *codex.ResponseItem) {
	m := c.Mapper
	call := it.CallID
	if call == "" {
		return // nothing to end
	}
	if _, done := m.endedSet[call]; done && !m.isOpen(call) {
		return // a call ends once
	}
	c.ensureTurn(r)
	m.ended(call)
	text := it.OutputText()
	ev := protocol.Event{T: protocol.KindToolCallEnd, Call: call}
	switch c.kinds[call] {
	case CodexShellName:
		text, ev.Error = c.execResult(call, text)
	case codexPatch:
		text, ev.Error, ev.Diff = c.patchResult(call, text)
	default:
		if _, body, ok := execOutput(text); ok {
			text = body // write_stdin and other unified exec output
		}
	}
	var full []byte
	if text != "" {
		preview, cut := Preview(text, protocol.MaxResultBytes)
		ev.Result, ev.Truncated = &preview, cut
		if cut {
			kept, _ := Preview(text, protocol.MaxFullResultBytes)
			full = []byte(kept)
			ev.Full = int64(len(full))
		}
	}
	delete(c.kinds, call)
	m.emitOwn(protocol.RoleAgent, protocol.DeriveID(m.session, c.turnKey, "call", call, "end"), nil, "", ev)
	m.out[len(m.out)-1].Blob = full
}

// execInfo is what unified exec's output header says.
type execInfo struct {
	exit    *int64
	running string // the command yielded: the header line naming its session
}

var execHeader = regexp.MustCompile(`^(Chunk ID|Wall time|Process exited with code|Process running with session ID|Original token count|Exit code|Total output lines)\b:?`)

// execOutput reads the header unified exec puts before a command's output
// ("Chunk ID: …", "Wall time: …", "Process exited with code N", "Original
// token count: …", "Output:") and returns the output after it; ok is false
// when text does not start with such a header (a refusal, a message of
// Codex's own).
func execOutput(text string) (execInfo, string, bool) {
	var info execInfo
	rest := text
	seen := false
	for rest != "" {
		line, after, found := strings.Cut(rest, "\n")
		if strings.HasPrefix(line, "Output:") {
			if !seen {
				return info, text, false
			}
			return info, after, true
		}
		if !execHeader.MatchString(line) {
			return info, text, false
		}
		seen = true
		switch {
		case strings.HasPrefix(line, "Process exited with code "):
			if n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "Process exited with code ")), 10, 64); err == nil {
				info.exit = &n
			}
		case strings.HasPrefix(line, "Exit code: "):
			if n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "Exit code: ")), 10, 64); err == nil {
				info.exit = &n
			}
		case strings.HasPrefix(line, "Process running with session ID"):
			info.running = line
		}
		if !found {
			break
		}
		rest = after
	}
	if !seen {
		return info, text, false
	}
	return info, "", true
}

// execResult is the result of an exec_command call: the command's output,
// after "Exit code N" when it failed (as Claude's Bash results say it), and
// whether it is an error (a non-zero exit, a failed or declined command, a
// refusal).
func (c *Codex) execResult(call, text string) (string, bool) {
	ce := c.commands[call]
	delete(c.commands, call)
	info, body, ok := execOutput(text)
	var exit *int64
	out := body
	failed := !ok // no header: Codex refused or could not start the command
	if ce != nil {
		exit = ce.ExitCode
		if ce.AggregatedOutput != nil {
			out = *ce.AggregatedOutput
		}
		switch ce.Status {
		case "failed", "declined":
			failed = true
		}
	}
	if exit == nil {
		exit = info.exit
	}
	if info.running != "" && exit == nil {
		// It yielded and runs on: what it printed so far, and that it runs.
		return body + "\n[" + info.running + "]", false
	}
	if exit != nil && *exit != 0 {
		return "Exit code " + strconv.FormatInt(*exit, 10) + "\n" + out, true
	}
	if !ok && ce == nil {
		return text, true
	}
	return out, failed
}

// patchResult is the result of an apply_patch call: Codex's own summary,
// whether it failed, and the diff of the first file it added or changed,
// with line numbers, from the FileChange item Codex wrote when it applied
// the patch.
func (c *Codex) patchResult(call, text string) (string, bool, *protocol.Diff) {
	fc := c.changes[call]
	p := c.patches[call]
	delete(c.changes, call)
	delete(c.patches, call)
	info, body, ok := execOutput(text)
	failed := !ok || (info.exit != nil && *info.exit != 0)
	if fc != nil && fc.Status != "" && fc.Status != "completed" {
		failed = true
	}
	if ok {
		text = body
	}
	if failed || fc == nil {
		return text, failed, nil // a failed edit has no diff
	}
	if fc.Stdout != "" {
		text = fc.Stdout
	}
	return text, false, changeDiff(fc.Changes, p)
}

// changeDiff is the diff of the first change, in the patch's order, that
// the protocol can show: an added file (numbered from 1) or an updated one
// (Codex's unified diff, with its line numbers). A deleted file has no
// diff of its own. The protocol gives one diff per call: the other files a
// patch changed are named in the result.
func changeDiff(changes codex.FileChanges, p codex.Patch) *protocol.Diff {
	order := make([]int, 0, len(changes))
	used := make([]bool, len(changes))
	for _, f := range p.Files {
		for i := range changes {
			if !used[i] && pathIs(changes[i].Path, f.Path) {
				order = append(order, i)
				used[i] = true
			}
		}
	}
	for i := range changes {
		if !used[i] {
			order = append(order, i)
		}
	}
	for _, i := range order {
		ch := &changes[i]
		path := ch.Path
		if ch.MovePath != nil && *ch.MovePath != "" {
			path = *ch.MovePath
		}
		path, cut := Preview(path, protocol.MaxDetailBytes)
		switch ch.Kind {
		case codex.PatchAdd:
			d := &protocol.Diff{Path: path, Op: protocol.DiffCreate, Truncated: cut}
			if ch.Content != "" {
				lines := strings.Split(strings.TrimSuffix(ch.Content, "\n"), "\n")
				plus := make([]string, len(lines))
				for j, l := range lines {
					plus[j] = "+" + l
				}
				var b diffBounds
				b.hunk(d, protocol.Hunk{NewStart: 1, NewLines: int64(len(lines))}, plus)
			}
			return d
		case codex.PatchUpdate:
			d := &protocol.Diff{Path: path, Op: protocol.DiffUpdate, Truncated: cut}
			if !unifiedHunks(d, ch.UnifiedDiff) {
				continue // no numbered hunks: nothing honest to show
			}
			return d
		}
	}
	return nil
}

// pathIs reports whether an absolute path from a FileChange is the
// patch's path p (relative to the working folder, or absolute).
func pathIs(abs, p string) bool {
	if abs == p {
		return true
	}
	return p != "" && strings.HasSuffix(abs, "/"+strings.TrimPrefix(p, "./"))
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// unifiedHunks adds the hunks of a unified diff to d, within the protocol's
// bounds; false when it has none.
func unifiedHunks(d *protocol.Diff, diff string) bool {
	var b diffBounds
	var h *protocol.Hunk
	var lines []string
	flush := func() bool {
		if h == nil {
			return true
		}
		ok := b.hunk(d, *h, lines)
		h, lines = nil, nil
		return ok
	}
	any := false
	for _, l := range strings.Split(diff, "\n") {
		if mt := hunkHeader.FindStringSubmatch(l); mt != nil {
			if !flush() {
				return true
			}
			h = &protocol.Hunk{OldStart: atoi(mt[1]), OldLines: count(mt[2]), NewStart: atoi(mt[3]), NewLines: count(mt[4])}
			any = true
			continue
		}
		if h == nil || l == "" || !strings.ContainsRune(" -+", rune(l[0])) {
			continue // file headers, "\ No newline at end of file", the last newline
		}
		lines = append(lines, l)
	}
	flush()
	return any
}

func atoi(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// count is a hunk header's line count: 1 when it is left out.
func count(s string) int64 {
	if s == "" {
		return 1
	}
	return atoi(s)
}

// usage maps a response's usage to the protocol's. The Responses API counts
// cached input inside input_tokens (and reasoning inside output_tokens);
// the protocol, as Anthropic's API, counts input_tokens without what was
// read from or written to the cache, so that context in use is
// input_tokens + cache_creation_input_tokens + cache_read_input_tokens.
// reasoning_output_tokens is passed on as Codex wrote it.
func (c *Codex) usage(u *codex.TokenUsage) *protocol.Usage {
	if u == nil {
		return nil
	}
	nonNeg := func(v int64) int64 { return max(v, 0) }
	read, write := nonNeg(u.CachedInputTokens), nonNeg(u.CacheWriteInputTokens)
	pu := &protocol.Usage{
		InputTokens:              max(nonNeg(u.InputTokens)-read-write, 0),
		OutputTokens:             nonNeg(u.OutputTokens),
		CacheReadInputTokens:     &read,
		CacheCreationInputTokens: &write,
		Extra:                    map[string]json.RawMessage{"reasoning_output_tokens": mustJSON(nonNeg(u.ReasoningOutputTokens))},
	}
	if c.window > 0 {
		w := c.window
		pu.ContextWindow = &w
	}
	return pu
}

// jsonErrorMessage is error.message (or message) of a JSON error body, ""
// when msg is not one.
func jsonErrorMessage(msg string) string {
	if !strings.HasPrefix(msg, "{") {
		return ""
	}
	var body struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal([]byte(msg), &body) != nil {
		return ""
	}
	if body.Error != nil && body.Error.Message != "" {
		return body.Error.Message
	}
	return body.Message
}
