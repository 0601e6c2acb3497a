package mapper

import (
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
)

// D17: a subagent's prompt and its task notification get ids from the
// subagent, not from the record, so the transcript's records (random uuids)
// and the ones remote mode builds from stream-json (no uuid) agree.
func TestD17IDsFromSubagentNotRecord(t *testing.T) {
	launch := `{"type":"assistant","uuid":"a1","timestamp":"2026-01-01T00:00:01Z","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"toolu_A","name":"Agent","input":{"description":"Count","prompt":"count files"}}]}}`
	async := `{"type":"user","uuid":"u2","timestamp":"2026-01-01T00:00:02Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_A","content":"Async agent launched"}]},"toolUseResult":{"status":"async_launched","agentId":"a123"}}`
	rootFromFile := `{"type":"user","uuid":"file-root-uuid","isSidechain":true,"agentId":"a123","parentUuid":null,"timestamp":"2026-01-01T00:00:03Z","message":{"role":"user","content":"count files"}}`
	rootFromStream := `{"type":"user","isSidechain":true,"agent_id":"a123","parent_tool_use_id":"toolu_A","timestamp":"2026-01-01T00:00:03Z","message":{"role":"user","content":"count files"}}`
	notifFile := `{"type":"user","uuid":"notif-uuid","origin":{"kind":"task-notification"},"timestamp":"2026-01-01T00:00:05Z","message":{"role":"user","content":"<task-notification>\n<task-id>a123</task-id>\n<tool-use-id>toolu_A</tool-use-id>\n<status>completed</status>\n</task-notification>"}}`
	notifStream := `{"type":"user","origin":{"kind":"task-notification"},"timestamp":"2026-01-01T00:00:05Z","message":{"role":"user","content":"<task-notification>\n<task-id>a123</task-id>\n<tool-use-id>toolu_A</tool-use-id>\n<status>completed</status>\n</task-notification>"}}`

	ids := func(root, notif string) map[protocol.Kind][]string {
		m := New(testSession)
		out := map[protocol.Kind][]string{}
		for _, l := range []string{launch, async, root, notif} {
			for _, e := range m.Map(rec(t, l)) {
				if e.Subagent != "" || e.Ev.T == protocol.KindService {
					out[e.Ev.T] = append(out[e.Ev.T], e.ID)
				}
			}
		}
		return out
	}
	a, b := ids(rootFromFile, notifFile), ids(rootFromStream, notifStream)
	for _, k := range []protocol.Kind{protocol.KindStart, protocol.KindText, protocol.KindStop, protocol.KindService} {
		if len(a[k]) != 1 || len(b[k]) != 1 || a[k][0] != b[k][0] {
			t.Fatalf("%s ids differ between transcript and stream records: %v vs %v", k, a[k], b[k])
		}
	}
}

// D17: the output of Claude's own slash commands is not the user's words;
// the command itself is the user's prompt, as typed (D19).
func TestD17LocalCommandOutputSkipped(t *testing.T) {
	runCase(t, []string{
		`{"type":"user","uuid":"u1","message":{"role":"user","content":"<command-name>/model</command-name>\n<command-message>model</command-message>\n<command-args>sonnet</command-args>"}}`,
		`{"type":"user","uuid":"u2","message":{"role":"user","content":"<local-command-stdout>Set model to sonnet</local-command-stdout>"}}`,
		`{"type":"user","uuid":"u3","message":{"role":"user","content":"hello"}}`,
	}, []string{"U(/model sonnet)[cmd=/model|sonnet]", "U(hello)"})
}

// D17 ids stay unique when a transcript reuses a tool id (copied or
// synthetic transcripts): the second prompt falls back to its record.
func TestD17ReusedToolIDStaysUnique(t *testing.T) {
	m := New(testSession)
	var envs []protocol.Envelope
	for i := range 2 {
		u := string(rune('a' + i))
		for _, l := range []string{
			`{"type":"user","uuid":"p` + u + `","message":{"role":"user","content":"go"}}`,
			`{"type":"assistant","uuid":"l` + u + `","message":{"id":"m` + u + `","role":"assistant","content":[{"type":"tool_use","id":"toolu_same","name":"Task","input":{"prompt":"do it"}}]}}`,
			`{"type":"user","uuid":"r` + u + `","isSidechain":true,"message":{"role":"user","content":"do it"}}`,
		} {
			envs = append(envs, m.Map(rec(t, l))...)
		}
	}
	checkInvariants(t, envs) // includes unique ids
}
