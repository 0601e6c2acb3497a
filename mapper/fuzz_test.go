package mapper

import (
	"bytes"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/protocol"
)

// FuzzMapper feeds arbitrary lines through the record parser and one mapper:
// no panic, every envelope valid, nothing of a turn after its turn-end.
func FuzzMapper(f *testing.F) {
	for _, s := range claudeSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte(child("c1", "late", "x") + "\n" + asst("p", bl(toolUse("late", "Agent", map[string]any{"prompt": "q"})))))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := New("fuzz")
		m.SetMaxBuffered(8)
		var envs []protocol.Envelope
		var dd claude.Dedupe // as in every real pipeline: the mapper sees each record once
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			r, err := claude.Parse(line)
			if err != nil || dd.Seen(r) {
				continue
			}
			envs = append(envs, m.Map(r)...)
		}
		envs = append(envs, m.Close(protocol.StatusCompleted)...)
		checkInvariants(t, envs)
		for i := range envs {
			if _, err := envs[i].AppendJSON(nil); err != nil {
				t.Fatalf("encode %s: %v", describe(envs[i]), err)
			}
		}
	})
}

// FuzzMapperOps builds record sequences from a small grammar (a few uuids,
// tool ids and agent ids, every record shape the mapper distinguishes), so
// the fuzzer explores the state machine rather than JSON syntax.
func FuzzMapperOps(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 3, 1, 1, 0, 5, 1, 2, 1, 7, 1, 1, 0, 9, 1, 0, 1})
	f.Add([]byte{5, 2, 0, 0, 4, 2, 1, 1, 11, 0, 0, 0, 8, 2, 0, 0, 12, 2, 0, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		m := New("fuzz")
		m.SetMaxBuffered(int(len(data)%5) + 1)
		var envs []protocol.Envelope
		for i := 0; i+3 < len(data); i += 4 {
			op, a, b, c := data[i]%20, int(data[i+1]%4), int(data[i+2]%4), data[i+3]
			line := opLine(i, op, a, b, c)
			if op == 15 {
				status := []protocol.TurnStatus{protocol.StatusCompleted, protocol.StatusFailed, protocol.StatusCancelled}[c%3]
				if c&32 != 0 {
					// Claude ended: the turn is cut (crash, switch).
					envs = append(envs, m.Cut(Cut{Status: status, Result: "gone", Note: "stopped", Source: []string{"", "s"}[a%2]})...)
					continue
				}
				envs = append(envs, m.Close(status)...)
				continue
			}
			r, err := claude.Parse([]byte(line))
			if err != nil {
				t.Fatalf("grammar line does not parse: %s: %v", line, err)
			}
			envs = append(envs, m.Map(r)...)
		}
		envs = append(envs, m.Close(protocol.StatusCompleted)...)
		checkInvariants(t, envs)
	})
}

func opLine(i int, op byte, a, b int, c byte) string {
	uuid := "u" + string(rune('a'+i%26)) + string(rune('a'+(i/26)%26)) + string(rune('0'+i/676%10))
	tools := []string{"t0", "t1", "t2", "t3"}
	agents := []string{"ag0", "ag1", "ag2", "ag3"}
	parents := []any{nil, "ua" + "a0", "uea0", "nowhere"}
	names := []string{"Task", "Agent", "Bash", ""}
	prompts := []string{"p0", "p1", "p0", " "}
	kv := []any{"parentUuid", parents[b]}
	if c&1 != 0 {
		kv = append(kv, "isSidechain", true)
	}
	if c&2 != 0 {
		kv = append(kv, "agentId", agents[b])
	}
	if c&4 != 0 {
		kv = append(kv, "parent_tool_use_id", tools[b])
	}
	if c&8 != 0 {
		kv = append(kv, "isMeta", true)
	}
	switch op {
	case 0:
		return user(uuid, "prompt "+prompts[a], kv...)
	case 1:
		return user(uuid, prompts[a], kv...)
	case 2:
		return asstU(uuid, "m"+tools[a], bl(text("x"), thinking("y")), kv...)
	case 3:
		return asst(uuid, bl(toolUse(tools[a], names[b], map[string]any{"prompt": prompts[a], "description": "d"})), kv...)
	case 4:
		if c&32 != 0 {
			// Claude's repair of a call whose session ended.
			return user(uuid, bl(toolResult(tools[a], sessionEnded, true)), kv...)
		}
		return user(uuid, bl(toolResult(tools[a], "out", c&16 != 0)), kv...)
	case 5:
		return asst(uuid, bl(text("child")), append(kv, "parent_tool_use_id", tools[a])...)
	case 6:
		return user(uuid, bl(toolResult(tools[a], "Async agent launched", false)),
			append(kv, "toolUseResult", map[string]any{"isAsync": true, "agentId": agents[a]})...)
	case 7:
		return user(uuid, "<task-notification><task-id>"+agents[a]+"</task-id><tool-use-id>"+tools[b]+"</tool-use-id><status>completed</status></task-notification>",
			"origin", map[string]any{"kind": "task-notification"})
	case 8:
		return r("type", "system", "uuid", uuid, "subtype", "turn_duration")
	case 9:
		return user(uuid, bl(text("[Request interrupted by user]")), kv...)
	case 10:
		return user(uuid, bl(text("look"), map[string]any{"type": "image"}), kv...)
	case 11:
		return r("type", "summary", "summary", "s", "leafUuid", uuid)
	case 12:
		if c&32 != 0 {
			return noResponse(uuid)
		}
		return asst(uuid, bl(text("compact")), append(kv, "isCompactSummary", true)...)
	case 13:
		return user(uuid, bl(toolResult(tools[a], "r", false), text("note")), kv...)
	case 14:
		return r("type", "system", "uuid", uuid, "subtype", "api_error", "error", map[string]any{"status": 529}, "retryAttempt", a+1, "maxRetries", 4)
	case 16:
		return asst(uuid, bl(text("API Error: 500 boom")), append(kv, "isApiErrorMessage", true, "apiErrorStatus", 500)...)
	case 17:
		return r("type", "system", "uuid", uuid, "subtype", "compact_boundary", "compactMetadata", map[string]any{"trigger": "auto", "preTokens": a})
	case 18:
		return user(uuid, "<command-name>/"+prompts[a]+"</command-name><command-args>"+prompts[b]+"</command-args>", kv...)
	case 19:
		return user(uuid, bl(toolResult(tools[a], "ok", false)),
			append(kv, "toolUseResult", map[string]any{"filePath": "/f", "type": "create", "content": "a\nb", "structuredPatch": []any{}})...)
	default:
		return r("type", "attachment", "uuid", uuid)
	}
}
