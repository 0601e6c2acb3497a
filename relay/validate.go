package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/ccrelay/ccrelay/protocol"
)

// Every frame is checked before anything is claimed, stored or forwarded:
// a refused frame leaves no trace (no empty session, no stored byte).

// refuseInvalidUTF8 answers a frame that is not valid UTF-8 anywhere
// (websocket text frames must be; a browser closes on one that is not).
// The code is the one the frame's type uses for a frame refused for what it
// is, so that a CLI drops it rather than send it again.
func refuseInvalidUTF8(f protocol.Frame, data []byte) *protocol.Frame {
	err := protocol.CheckUTF8(data)
	if err == nil {
		return nil
	}
	e := errorFrame(refusalCode(f.Type), "the frame is not valid UTF-8 (%v); nothing of it was stored or forwarded", err)
	e.Ref = f.Ref
	return &e
}

// refusalCode is the error code for a frame of type typ refused for what
// it is (a CLI drops such a frame rather than send it again).
func refusalCode(typ string) string {
	code := map[string]string{
		protocol.FrameEnvelopes: "bad-batch",
		protocol.FrameAnnounce:  "bad-announce",
		protocol.FrameLive:      "bad-live",
		protocol.FrameResult:    "bad-result",
		protocol.FrameCommand:   "bad-command",
		protocol.FrameSubscribe: "bad-subscribe",
	}[typ]
	if code == "" {
		code = "bad-frame"
	}
	return code
}

func checkSession(id string) error {
	if !protocol.IsSessionID(id) {
		return fmt.Errorf("session id %q is not a UUID (lowercase, 8-4-4-4-12 hex digits, as Claude Code makes them)", clip(id, 64))
	}
	return nil
}

// checkBatch validates a FrameEnvelopes and returns its items.
func checkBatch(f protocol.Frame) ([]Item, *protocol.Frame) {
	if err := checkSession(f.Session); err != nil {
		e := errorFrame("bad-batch", "%v", err)
		return nil, &e
	}
	if len(f.Envelopes) == 0 || len(f.Envelopes) > maxBatch {
		e := errorFrame("bad-batch", "a batch needs 1 to %d envelopes, not %d", maxBatch, len(f.Envelopes))
		return nil, &e
	}
	items := make([]Item, len(f.Envelopes))
	envs := make([]protocol.Envelope, len(f.Envelopes))
	sealed := make([]bool, len(f.Envelopes))
	for i, raw := range f.Envelopes {
		if len(raw) > protocol.MaxEnvelopeBytes {
			e := errorFrame("bad-envelope", "envelope %d is %d bytes, more than %d", i, len(raw), protocol.MaxEnvelopeBytes)
			return nil, &e
		}
		if protocol.IsSealed(raw) {
			// Sealed end to end: only the readable fields are checked.
			h, err := protocol.DecodeSealed(raw)
			if err != nil {
				e := errorFrame("bad-envelope", "envelope %d: %v", i, err)
				return nil, &e
			}
			items[i] = Item{ID: h.ID, Body: raw}
			envs[i] = protocol.Envelope{ID: h.ID, Ev: protocol.Event{T: h.Ev.T}}
			sealed[i] = true
			continue
		}
		var env protocol.Envelope
		if err := json.Unmarshal(raw, &env); err != nil {
			e := errorFrame("bad-envelope", "envelope %d: %v", i, err)
			return nil, &e
		}
		if err := env.Validate(); err != nil {
			e := errorFrame("bad-envelope", "envelope %d: %v", i, err)
			return nil, &e
		}
		items[i] = Item{ID: env.ID, Body: raw}
		envs[i] = env
	}
	if len(f.Blobs) > len(f.Envelopes) {
		e := errorFrame("bad-batch", "%d blobs for %d envelopes", len(f.Blobs), len(f.Envelopes))
		return nil, &e
	}
	for _, b := range f.Blobs {
		i := slices.IndexFunc(items, func(it Item) bool { return it.ID == b.ID })
		if i < 0 || items[i].Blob != nil {
			e := errorFrame("bad-batch", "blob %q is not for one envelope of the batch", clip(b.ID, 40))
			return nil, &e
		}
		check := checkBlob
		if sealed[i] {
			check = checkSealedBlob
		}
		if err := check(&envs[i], b.Data); err != nil {
			e := errorFrame("bad-envelope", "envelope %d: blob: %v", i, err)
			return nil, &e
		}
		items[i].Blob = b.Data
	}
	return items, nil
}

// BlobImageTypes are the types of image a file envelope's blob may be: the
// app shows them as images (docs/protocol.md, "Blobs").
var BlobImageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// checkSealedBlob checks what the relay can of a sealed envelope's blob:
// its kind may have one, and its size is within that kind's bound once
// sealed.
func checkSealedBlob(env *protocol.Envelope, data []byte) error {
	limit := 0
	switch env.Ev.T {
	case protocol.KindToolCallEnd:
		limit = protocol.MaxFullResultBytes
	case protocol.KindFile:
		limit = protocol.MaxBlobBytes
	default:
		return fmt.Errorf("a %s envelope has no blob", env.Ev.T)
	}
	if len(data) < protocol.SealOverhead || len(data) > limit+protocol.SealOverhead {
		return fmt.Errorf("a sealed blob of %d bytes (%d to %d)", len(data), protocol.SealOverhead, limit+protocol.SealOverhead)
	}
	return nil
}

// checkBlob checks that env declares the blob it comes with: a
// tool-call-end's full result (valid UTF-8, as long as its full says), or a
// file envelope's image (its ref is its own id, its size and type say
// what the blob is).
func checkBlob(env *protocol.Envelope, data []byte) error {
	switch ev := &env.Ev; ev.T {
	case protocol.KindToolCallEnd:
		if int64(len(data)) != ev.Full || ev.Full == 0 {
			return fmt.Errorf("%d bytes, but the envelope's full says %d", len(data), ev.Full)
		}
		return protocol.CheckUTF8(data)
	case protocol.KindFile:
		switch {
		case ev.Ref != env.ID:
			return fmt.Errorf("the file's ref is not its envelope's id")
		case ev.Size == nil || int64(len(data)) != *ev.Size:
			return fmt.Errorf("%d bytes, but the file's size says otherwise", len(data))
		case len(data) > protocol.MaxBlobBytes:
			return fmt.Errorf("%d bytes, more than %d", len(data), protocol.MaxBlobBytes)
		case !slices.Contains(BlobImageTypes, ev.MimeType):
			return fmt.Errorf("type %q is not an image type the relay keeps", clip(ev.MimeType, 40))
		}
		return nil
	}
	return fmt.Errorf("a %s envelope has no blob", env.Ev.T)
}

// checkInfo validates an announced session description: a JSON object of
// at most MaxInfoBytes, its top-level strings within MaxInfoStringBytes,
// at most MaxInfoPermissions permission requests.
func checkInfo(info json.RawMessage) error {
	if len(info) > protocol.MaxInfoBytes {
		return fmt.Errorf("info is %d bytes, more than %d", len(info), protocol.MaxInfoBytes)
	}
	var m map[string]json.RawMessage
	if len(info) == 0 || info[0] != '{' || json.Unmarshal(info, &m) != nil {
		return fmt.Errorf("info must be a JSON object")
	}
	for k, v := range m {
		if len(v) > 0 && v[0] == '"' && len(v) > protocol.MaxInfoStringBytes+2 {
			return fmt.Errorf("info %q is %d bytes, more than %d", clip(k, 64), len(v)-2, protocol.MaxInfoStringBytes)
		}
	}
	if p, ok := m["permissions"]; ok {
		var list []json.RawMessage
		if json.Unmarshal(p, &list) != nil {
			return fmt.Errorf("info permissions must be a list")
		}
		if len(list) > protocol.MaxInfoPermissions {
			return fmt.Errorf("info lists %d permission requests, more than %d", len(list), protocol.MaxInfoPermissions)
		}
	}
	return nil
}

// Lists carry a bounded summary of each session's info, never the whole of
// it: the keys apps show, strings cut, the first permission requests with
// their inputs cut.
const (
	summaryStringBytes = 1024     // a string of the summary
	summaryPermissions = 8        // permission requests in a summary
	summaryInputBytes  = 2048     // a permission request's input in a summary
	summaryUsageBytes  = 1024     // the usage object in a summary
	MaxSummaryBytes    = 32 << 10 // what one session's summary can reach
)

var summaryStrings = []string{"cwd", "title", "machine", "mode", "status", "model", "permissionMode", "error"}

// summaryTurnCosts bounds the turn costs that lists carry (the last ones;
// launcher.MaxTurnCosts).
const summaryTurnCosts = 64

// summaryTasks bounds the subagents' progress that lists carry.
const summaryTasks = 16

// summaryInfo is the bounded part of info that lists carry.
func summaryInfo(info json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(info, &m) != nil {
		return json.RawMessage(`{}`)
	}
	out := map[string]any{}
	for _, k := range summaryStrings {
		var s string
		if json.Unmarshal(m[k], &s) == nil && s != "" {
			out[k] = clip(s, summaryStringBytes)
		}
	}
	// A fork's parent: a session id, or left out.
	var parent string
	if json.Unmarshal(m["forkedFrom"], &parent) == nil && parent != "" && checkSession(parent) == nil {
		out["forkedFrom"] = parent
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
		for _, c := range costs[max(0, len(costs)-summaryTurnCosts):] {
			if protocol.IsCuid(c.Turn) && c.USD >= 0 && c.USD < 1e6 {
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
			if protocol.IsCuid(t.Subagent) {
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
		for _, p := range perms[:min(len(perms), summaryPermissions)] {
			q := map[string]any{}
			for _, k := range []string{"id", "tool", "description", "call", "subagent", "blockedPath"} {
				var s string
				if json.Unmarshal(p[k], &s) == nil && s != "" {
					q[k] = clip(s, summaryStringBytes/4)
				}
			}
			var rules []string
			if json.Unmarshal(p["forSession"], &rules) == nil && len(rules) > 0 {
				rules = rules[:min(len(rules), 4)]
				for i := range rules {
					rules[i] = clip(rules[i], summaryStringBytes/4)
				}
				q["forSession"] = rules
			}
			if in := shrinkInput(p["input"]); in != nil {
				q["input"] = in
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
// command or the path of a request, and a part of the rest).
func shrinkInput(in json.RawMessage) any {
	in = bytes.TrimSpace(in)
	if len(in) == 0 || in[0] != '{' {
		return nil
	}
	if len(in) <= summaryInputBytes {
		return in
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(in, &m) != nil {
		return nil
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
	return out
}

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
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
