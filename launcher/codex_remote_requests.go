package launcher

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
)

// codexHandler is what app-server sends a CodexRemote: its notifications
// and its requests, from the client's reader, one at a time.
type codexHandler struct{ r *CodexRemote }

// The tools a Codex request is shown as in the app: a command as Bash
// (command, cwd, description), a file change as apply_patch (the files
// with their diffs), questions as AskUserQuestion, as the mapper names the calls (mapper.CodexShellName).
// The request's call is Codex's call id, the call's id in the envelopes.
const (
	CodexToolCommand  = "Bash"
	CodexToolPatch    = "apply_patch"
	CodexToolQuestion = "AskUserQuestion"
)

func (h *codexHandler) Notify(n codex.Notification) {
	r := h.r
	switch n.Method {
	case codex.NotifyTurnStarted, codex.NotifyTurnCompleted:
		var t codex.TurnNotification
		if json.Unmarshal(n.Params, &t) != nil {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if t.ThreadID != "" && t.ThreadID != r.thread {
			// A subagent's thread (app-server tells of every thread it
			// runs): its turn runs inside the session's, which it does not
			// start or end. What it asked no longer waits once it ended.
			if n.Method == codex.NotifyTurnCompleted {
				before := len(r.pending)
				r.pending = slices.DeleteFunc(r.pending, func(p *codexPending) bool { return p.turn == t.Turn.ID })
				if len(r.pending) != before {
					r.publish()
				}
			}
			return
		}
		r.declinedDoneLocked()
		if n.Method == codex.NotifyTurnStarted {
			r.turn = t.Turn.ID
		} else {
			if r.turn == t.Turn.ID {
				r.turn = ""
			}
			r.finished = t.Turn.ID
			// What Codex asked in that turn no longer waits.
			r.pending = slices.DeleteFunc(r.pending, func(p *codexPending) bool { return p.turn == t.Turn.ID })
			clear(r.changes)
			r.order = r.order[:0]
		}
		r.publish()
	case codex.NotifyItemStarted, codex.NotifyItemCompleted:
		var it codex.ItemNotification
		if json.Unmarshal(n.Params, &it) != nil || it.Item.Type != "fileChange" || it.Item.ID == "" {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.keepChanges(it.Item.ID, it.Item.Changes)
	case codex.NotifyAgentMessageDelta:
		var d codex.DeltaNotification
		if r.events == nil || json.Unmarshal(n.Params, &d) != nil || d.Delta == "" {
			return
		}
		r.mu.Lock()
		thread := r.thread
		r.mu.Unlock()
		if d.ThreadID != thread {
			return // a subagent's typing: its text comes with its rollout
		}
		b, _ := json.Marshal(liveDelta{Type: "delta", Message: d.ItemID, Text: d.Delta})
		r.events.Live(d.ThreadID, b)
	case codex.NotifyRequestResolved:
		var res codex.ResolvedNotification
		if json.Unmarshal(n.Params, &res) != nil {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		n := len(r.pending)
		r.pending = slices.DeleteFunc(r.pending, func(p *codexPending) bool { return string(p.req.ID) == string(res.RequestID) })
		if len(r.pending) != n {
			r.publish()
		}
	}
}

// keepChanges keeps a fileChange item's changes for the approval that
// names it (at most MaxCodexChanges items, MaxCodexDiff bytes of diff
// each, MaxCodexChangePaths paths of MaxCodexPath bytes each, then one
// entry that says how many more there were). What is kept is only shown:
// the approval's answer accepts or declines the whole change. Called with
// mu held.
func (r *CodexRemote) keepChanges(id string, changes []codex.FileUpdateChange) {
	if len(changes) == 0 {
		return
	}
	size := 0
	kept := make([]codex.FileUpdateChange, 0, min(len(changes), MaxCodexChangePaths+1))
	for i, c := range changes {
		if i == MaxCodexChangePaths {
			kept = append(kept, codex.FileUpdateChange{Path: fmt.Sprintf("(and %d more files)", len(changes)-i)})
			break
		}
		if size+len(c.Diff) > MaxCodexDiff {
			c.Diff = "(diff too long to show)"
		}
		if len(c.Path) > MaxCodexPath {
			c.Path = cutString(c.Path, MaxCodexPath)
		}
		size += len(c.Diff)
		kept = append(kept, c)
	}
	if _, ok := r.changes[id]; !ok {
		r.order = append(r.order, id)
	}
	r.changes[id] = kept
	for len(r.order) > MaxCodexChanges {
		delete(r.changes, r.order[0])
		r.order = r.order[1:]
	}
}

func (h *codexHandler) Dropped(method string, size int64, err error) {
	h.r.log.Warn("codex remote: a line of app-server's was not read", "method", method, "bytes", size, "err", err)
}

// Request shows an approval to the app, or declines at once, with a
// note, what the app cannot answer. Every request is answered, now or by
// the app, an interrupt, the turn's end or Stop.
func (h *codexHandler) Request(req *codex.Request) {
	r := h.r
	r.mu.Lock()
	defer r.mu.Unlock()
	p, why := r.shown(req)
	if p != nil {
		clipShown(&p.pr)
		if slices.ContainsFunc(r.pending, func(q *codexPending) bool { return q.pr.ID == p.pr.ID }) {
			p.pr.ID += "#" + req.Key()
		}
		if len(p.pr.ID) > protocol.MaxFieldBytes {
			// The app's answer names it in a field of at most that many
			// bytes: it would wait for an answer that cannot come.
			p, why = nil, "its id is longer than an answer from the app can name"
		} else if len(r.pending) >= MaxInfoPermissionsShown {
			p, why = nil, fmt.Sprintf("%d requests wait for the app already", MaxInfoPermissionsShown)
		}
	}
	if p != nil {
		r.pending = append(r.pending, p)
		r.publish()
		return
	}
	reason := "ccrelay declined it: " + why
	if err := codex.Decline(req, reason, false); err != nil {
		r.log.Warn("codex remote: could not decline a request", "method", req.Method, "err", err)
	}
	r.log.Info("codex remote: declined a request", "method", req.Method, "why", why)
	r.declinedLocked(req, reason)
}

// MaxInfoPermissionsShown bounds the requests waiting for the app (the
// relay keeps 64 in an announcement); one more is declined.
const MaxInfoPermissionsShown = 64

// MaxDeclinedNotes bounds the notes of declined requests in a turn: past
// it, the requests declined are counted and said in one note at the
// turn's end (or the next turn's start).
const MaxDeclinedNotes = 8

// declinedLocked tells the app of a request declined, or counts it past
// MaxDeclinedNotes in the turn. Called with mu held.
func (r *CodexRemote) declinedLocked(req *codex.Request, reason string) {
	if r.declinedNoted >= MaxDeclinedNotes {
		r.declinedMore++
		return
	}
	r.declinedNoted++
	r.noteLocked("codex-declined:"+r.thread+":"+req.Method+":"+req.Key()+":"+fmt.Sprint(r.notes),
		describeRequest(req)+" "+reason+".")
}

// declinedDoneLocked says how many requests were declined past
// MaxDeclinedNotes, if any, and starts the count again. Called with mu
// held.
func (r *CodexRemote) declinedDoneLocked() {
	if r.declinedMore > 0 {
		r.noteLocked("codex-declined-more:"+r.thread+":"+fmt.Sprint(r.notes),
			fmt.Sprintf("Codex sent %d more requests that ccrelay declined.", r.declinedMore))
	}
	r.declinedNoted, r.declinedMore = 0, 0
}

// shown turns a request the app can answer into a pending request; for
// any other it says why not.
func (r *CodexRemote) shown(req *codex.Request) (*codexPending, string) {
	if req.Oversize {
		return nil, "the request was too large or not readable"
	}
	p := &codexPending{req: req}
	switch req.Method {
	case codex.RequestCommandApproval:
		var a codex.CommandApprovalParams
		if err := json.Unmarshal(req.Params, &a); err != nil || a.ItemID == "" {
			return nil, "the request was not readable"
		}
		if a.Kind != "" && a.Kind != "command" {
			return nil, "the app cannot answer a request of kind " + clip(a.Kind, 40)
		}
		cmd := deref(a.Command)
		p.turn = a.TurnID
		in := map[string]any{"command": cmd, "cwd": deref(a.Cwd), "description": deref(a.Reason)}
		// What an accept grants with the command is said where the app
		// shows the request, before the model's reason (grantsFirst).
		// "For this session" (acceptForSession) puts what was asked in
		// Codex's session-wide approval cache, the extra permissions and
		// the host included: its rules say so first, as a grantRoot's.
		var grants, rules []string
		if host := rawOrNil(a.NetworkApprovalContext); host != nil {
			in["networkApprovalContext"] = host
			grants = append(grants, "Codex asks for network access: "+clip(string(host), 500))
			var h struct {
				Host string `json:"host"`
			}
			_ = json.Unmarshal(host, &h)
			rules = append(rules, "network access to "+cmp.Or(clip(h.Host, 200), "a host"))
		}
		if perms := rawOrNil(a.AdditionalPermissions); perms != nil {
			in["additionalPermissions"] = perms
			grants = append(grants, "Codex also asks for these permissions with it: "+describePermissions(perms))
			rules = append(rules, "the extra permissions it asks for")
		}
		desc := grantsFirst(grants, deref(a.Reason))
		p.pr = PermissionRequest{ID: a.ItemID, Call: a.ItemID, Tool: CodexToolCommand, Description: desc, Input: mustJSON(in)}
		if a.ApprovalID != nil && *a.ApprovalID != "" {
			p.pr.ID += ":" + *a.ApprovalID
		}
		if cmd != "" {
			rules = append(rules, clip(cmd, 200))
		}
		p.pr.ForSession = rules
	case codex.RequestFileChangeApproval:
		var a codex.FileChangeApprovalParams
		if err := json.Unmarshal(req.Params, &a); err != nil || a.ItemID == "" {
			return nil, "the request was not readable"
		}
		p.turn = a.TurnID
		changes := r.changes[a.ItemID]
		in := map[string]any{"changes": changeList(changes)}
		if a.Reason != nil {
			in["reason"] = *a.Reason
		}
		p.pr = PermissionRequest{ID: a.ItemID, Call: a.ItemID, Tool: CodexToolPatch, Description: deref(a.Reason), Input: mustJSON(in)}
		for _, c := range changes {
			p.pr.ForSession = append(p.pr.ForSession, c.Path)
		}
		if len(changes) == 0 {
			p.pr.Description = strings.TrimSpace(deref(a.Reason) + " (Codex did not say which files)")
		}
		if root := deref(a.GrantRoot); root != "" {
			// Codex also asks to write anywhere under root for the rest of
			// the session: said where the answer is given, and first among
			// what "for this session" allows.
			in["grantRoot"] = root
			p.pr.Input = mustJSON(in)
			p.pr.Description = grantsFirst([]string{grantRootText(root)}, p.pr.Description)
			p.pr.ForSession = append([]string{"writes under " + root}, p.pr.ForSession...)
		}
	case codex.RequestLegacyExec:
		var a codex.LegacyExecParams
		if err := json.Unmarshal(req.Params, &a); err != nil || a.CallID == "" {
			return nil, "the request was not readable"
		}
		cmd := strings.Join(a.Command, " ")
		p.pr = PermissionRequest{ID: a.CallID, Call: a.CallID, Tool: CodexToolCommand, Description: deref(a.Reason), ReasonRead: true,
			Input: mustJSON(map[string]string{"command": cmd, "cwd": a.Cwd, "description": deref(a.Reason)})}
		p.pr.ForSession = []string{clip(cmd, 200)}
	case codex.RequestLegacyPatch:
		var a codex.LegacyPatchParams
		if err := json.Unmarshal(req.Params, &a); err != nil || a.CallID == "" {
			return nil, "the request was not readable"
		}
		in := map[string]any{"fileChanges": a.FileChanges}
		p.pr = PermissionRequest{ID: a.CallID, Call: a.CallID, Tool: CodexToolPatch, Description: deref(a.Reason), ReasonRead: true}
		for _, path := range slices.Sorted(maps.Keys(a.FileChanges)) {
			p.pr.ForSession = append(p.pr.ForSession, path)
		}
		if root := deref(a.GrantRoot); root != "" {
			in["grantRoot"] = root
			p.pr.Description = grantsFirst([]string{grantRootText(root)}, p.pr.Description)
			p.pr.ForSession = append([]string{"writes under " + root}, p.pr.ForSession...)
		}
		p.pr.Input = mustJSON(in)
	case codex.RequestPermissions:
		var a codex.PermissionsApprovalParams
		if err := json.Unmarshal(req.Params, &a); err != nil || a.ItemID == "" {
			return nil, "the request was not readable"
		}
		p.turn = a.TurnID
		var grants []string
		if perms := rawOrNil(a.Permissions); perms != nil {
			grants = append(grants, "Codex asks for these permissions: "+describePermissions(perms))
		}
		p.pr = PermissionRequest{ID: a.ItemID, Tool: "Permissions", Description: grantsFirst(grants, deref(a.Reason)),
			Input:      mustJSON(map[string]any{"cwd": a.Cwd, "permissions": a.Permissions, "description": deref(a.Reason)}),
			ForSession: []string{"these permissions"}}
	case codex.RequestUserInput:
		var a codex.UserInputParams
		if err := json.Unmarshal(req.Params, &a); err != nil || a.ItemID == "" || len(a.Questions) == 0 {
			return nil, "the request was not readable"
		}
		// Shown as Claude's AskUserQuestion, which the app answers with
		// a tap on a choice; a question without choices, or a secret
		// one, is not for the app.
		var qs []map[string]any
		for _, q := range a.Questions {
			if len(q.Options) == 0 || q.IsSecret {
				return nil, "the app answers only questions with choices, and no secret ones"
			}
			var opts []map[string]string
			for _, o := range q.Options {
				opts = append(opts, map[string]string{"label": o.Label, "description": o.Description})
			}
			qs = append(qs, map[string]any{"question": q.Question, "header": q.Header, "options": opts, "multiSelect": false})
		}
		p.turn = a.TurnID
		p.pr = PermissionRequest{ID: a.ItemID, Call: a.ItemID, Tool: CodexToolQuestion, Input: mustJSON(map[string]any{"questions": qs})}
	case codex.RequestElicitation:
		return nil, "the app cannot answer an MCP server's request yet"
	case codex.RequestDynamicTool:
		return nil, "ccrelay provides no tools of its own"
	case codex.RequestAuthRefresh:
		return nil, "ccrelay cannot log in to ChatGPT for Codex"
	case codex.RequestAttestation:
		return nil, "ccrelay cannot attest this client"
	default:
		return nil, "ccrelay does not know this request"
	}
	return p, ""
}

// grantsFirst is a request's description: what an accept grants beyond
// the request itself (grants, each in parentheses), then the model's
// reason. The grants come first, each bounded, because the description is
// cut to MaxShownString (clipShown) and the reason is the model's to make
// as long as it likes: after it, a grant could be cut out of what the app
// shows.
func grantsFirst(grants []string, reason string) string {
	var b strings.Builder
	for _, g := range grants {
		b.WriteString("(" + g + ") ")
	}
	b.WriteString(reason)
	return strings.TrimSpace(b.String())
}

// grantRootText says that a file change asks for writes under root.
func grantRootText(root string) string {
	return "Codex also asks to write anywhere under " + clip(root, 2000) + " for the rest of the session"
}

// describeRequest says what a declined request asked, for the note.
func describeRequest(req *codex.Request) string {
	switch req.Method {
	case codex.RequestUserInput:
		var a codex.UserInputParams
		if json.Unmarshal(req.Params, &a) == nil && len(a.Questions) > 0 {
			var qs []string
			for _, q := range a.Questions[:min(len(a.Questions), 4)] {
				qs = append(qs, clip(strings.TrimSpace(q.Question), 300))
			}
			return "Codex asked: " + strings.Join(qs, " / ") + "."
		}
		return "Codex asked the user a question."
	case codex.RequestElicitation:
		var a codex.ElicitationParams
		if json.Unmarshal(req.Params, &a) == nil && a.ServerName != "" {
			return fmt.Sprintf("The MCP server %s asked: %s.", clip(a.ServerName, 100), clip(strings.TrimSpace(a.Message), 500))
		}
		return "An MCP server asked for input."
	case codex.RequestDynamicTool:
		var a codex.DynamicToolParams
		if json.Unmarshal(req.Params, &a) == nil && a.Tool != "" {
			return fmt.Sprintf("Codex called the tool %s, which the client was to run.", clip(a.Tool, 100))
		}
	case codex.RequestAuthRefresh:
		return "Codex asked for a new ChatGPT login."
	case codex.RequestAttestation:
		return "Codex asked for an attestation of the client."
	}
	return fmt.Sprintf("Codex sent the request %s.", clip(req.Method, 100))
}

// changeList is a fileChange item's files as the app is shown them.
func changeList(changes []codex.FileUpdateChange) []map[string]string {
	out := make([]map[string]string, 0, len(changes))
	for _, c := range changes {
		out = append(out, map[string]string{"path": c.Path, "kind": c.KindName(), "diff": c.Diff})
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}
