package launcher

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/protocol"
)

// The usage remote mode sends with each message is the final one Claude
// wrote (the transcript's), with all its keys: the message that launches a
// background subagent, the background subagent's own messages, a message
// whose tool call waits for a permission, and a plain reply. Claude prints
// each message with the usage of its start (output_tokens 1) and fewer
// keys.
func TestRealClaudeRemoteFinalUsage(t *testing.T) {
	no := fakeapi.Bool(false)
	rules := backgroundHelper(fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("The helper is done.")}})
	rules = append([]fakeapi.Rule{{Agent: "main", LastUserContains: "make the file", AfterToolResult: no, Reply: []fakeapi.Block{fakeapi.Text("Making it."),
		fakeapi.ToolUse("Bash", map[string]any{"command": "touch made.txt", "description": "Make the file"})}}}, rules...)
	rig, e := realRemote(t, rules...)
	rig.prompt("spawn a helper")
	rig.until("the follow-up turn", func(d []string) bool {
		return count(d, "A(The helper is done.)") == 1 && strings.HasPrefix(d[len(d)-1], "TE(")
	})
	rig.prompt("make the file")
	st := rig.untilState("a permission request", func(s SessionState) bool { return len(s.Permissions) == 1 })
	// The message that asks waits with its final usage.
	rig.until("the call", has("TCS(toolu_fake0003", 1))
	if err := rig.r.Answer(st.Permissions[0].ID, true, nil, false, ""); err != nil {
		t.Fatal(err)
	}
	rig.until("the second turn", has("TE(completed)", 3))
	// Claude prints before it writes its transcript, and one stopped
	// before it wrote a batch never writes it.
	rig.untilTranscriptHolds(e)
	rig.r.Stop(protocol.StatusCompleted)
	live := map[string]string{}
	for _, env := range rig.out.Envelopes() {
		if env.Usage != nil {
			b, _ := json.Marshal(env.Usage)
			live[env.ID] = describe(env) + " " + string(b)
		}
	}
	n := 0
	for _, env := range replayFiles(t, filepath.Join(e.ProjectDir(t), rig.r.ID()+".jsonl")) {
		if env.Usage == nil {
			continue
		}
		n++
		b, _ := json.Marshal(env.Usage)
		want := describe(env) + " " + string(b)
		if !strings.Contains(want, "service_tier") || !strings.Contains(want, "cache_creation") || !strings.Contains(want, "server_tool_use") {
			t.Errorf("the transcript's usage lacks keys Claude writes: %s", want)
		}
		if live[env.ID] != want {
			t.Errorf("usage of %s\nlive:   %s\nreplay: %s", env.ID, live[env.ID], want)
		}
	}
	if n < 6 {
		t.Fatalf("%d envelopes with usage in the replay", n)
	}
}
