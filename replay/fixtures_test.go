package replay

import (
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/protocol"
)

// matchPrefixes fails unless got has len(want) entries and each starts with
// the matching want entry (texts are long; the prefix names them).
func matchPrefixes(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d envelopes, want %d\n got: %s\nwant: %s", len(got), len(want), strings.Join(got, " | "), strings.Join(want, " | "))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Fatalf("envelope %d\n got: %.200s\nwant prefix: %s", i, got[i], want[i])
		}
	}
}

// reference-behavior §8.4: the happy fixtures. Where a decision changes the
// expected output the case says which.
func TestHappyFixtures(t *testing.T) {
	subTS := "[sub=" + protocol.SubagentID("toolu_01EmKA8FJ7B2Ah9seGxK1Wct") + "]"
	tests := []struct {
		file string
		why  string
		want []string
	}{
		{"0-say-lol-session.jsonl", "#33", []string{"U(say lol)", "TS", "A(lol)[usage]"}},
		{"1-continue-run-ls-tool.jsonl", "#34; D8 adds the result preview",
			[]string{"U(say lol)", "TS", "A(lol)[usage]", "TE(completed)", "U(run ls tool )", "TS",
				"TCS(toolu_017qi6cZcBasF4SX1qvFjE2b,LS,", "TCE(toolu_017qi6cZcBasF4SX1qvFjE2b)[result=- /Users/", "A(0-say-lol-session.jsonl"}},
		{"task_non_sdk.jsonl", "#35; D8 adds result previews",
			[]string{"U(Show me a sample", "TS", "A(I'll demonstrate", "S(Search TypeScript 5.6 features)" + subTS,
				"A(Search the web for information", "A(I'll search for information", "TCS(toolu_01NeNNHZD5QYiBQCRYTUwhME,WebSearch",
				"TCE(toolu_01NeNNHZD5QYiBQCRYTUwhME)" + subTS, "A(Let me get more specific", "TCS(toolu_01St6YuC4MdxA9A9NXuBDKVY,WebFetch",
				"TCE(toolu_01St6YuC4MdxA9A9NXuBDKVY)" + subTS, "A(# TypeScript 5.6 New Features", "P" + subTS, "A(The Task tool successfully"}},
		{"task_sdk.jsonl", "#36: turn left open at EOF",
			[]string{"U(Show me a sample", "TS", "A(I'll demonstrate", "A(The Task tool successfully", "TE(completed)", "U(ok)", "TS",
				"A(I'll read that Claude session", "TCS(toolu_01WcAeP5o1cykMtWBgyETq46,Read"}},
		{"permission-prompt-aborted-with-interrupt.jsonl",
			"#37 changed by D16 (the interrupt marker cancels the turn instead of appearing as the user's words) and D6 (usage once per message id: the Write line shares the text line's message)",
			[]string{"U(Create file lol.txt", "TS", "A(I'll create a file named `lol.txt`", "TCS(toolu_012zxmcJcS9XBT1g3pbUt1tx,Write,Write call,",
				"TCE(toolu_012zxmcJcS9XBT1g3pbUt1tx)[err][result=Permission prompt was aborted.]", "SVC(Interrupted by user)", "TE(cancelled)"}},
		{"duplicate-assistant-response.jsonl", "#38 changed by D5: the API message written twice is forwarded once",
			[]string{"U(Say lol)", "TS", "A(lol)[usage]", "TE(completed)", "U(Say kekr)", "TS", "A(kekr)[usage]"}},
		{"api-error/rate-limit.jsonl", "#39 changed by D18: the API error is a service envelope with its status (no zero usage) and the turn fails",
			[]string{"U(what is on my todo list today?)", "TS", "SVC(You've hit your limit · resets Jul 23 at 6pm (America/Los_Angeles))[api=429,You've hit your limit", "TE(failed)"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got := replayFile(t, corpusDir+"/happy-fixtures/"+tt.file)
			envtest.CheckInvariants(t, got.envs)
			matchPrefixes(t, envtest.DescribeAll(got.envs), tt.want)
		})
	}
	// #39 with D18: the synthetic error message's zero usage is not shown
	// as if the model had answered.
	got := replayFile(t, corpusDir+"/happy-fixtures/api-error/rate-limit.jsonl")
	if u := got.envs[2].Usage; u != nil {
		t.Fatalf("rate-limit usage %+v", u)
	}
	// #38 without D5 the text would come twice.
	dup := replayFile(t, corpusDir+"/happy-fixtures/duplicate-assistant-response.jsonl")
	if dup.stats.Duplicates != 1 {
		t.Fatalf("D5: %d duplicates dropped, want 1", dup.stats.Duplicates)
	}
}

// D13 end to end on the real Claude Code 2.1.330 capture of a background
// Agent: the subagent's work appears between its start and stop with its
// title, the async-launch result does not stop it, the task notification is
// a service envelope and not a user prompt, and no turn has content after
// its turn-end.
func TestAgentBackgroundD13(t *testing.T) {
	got := replayFile(t, corpusDir+"/claude-code-2.1.330/agent-background/transcripts/-home-dev-project/fc141a3b-db42-42fd-b003-09c712c8bbfd.jsonl")
	envtest.CheckInvariants(t, got.envs)
	s := "[sub=" + protocol.SubagentID("toolu_fake0002") + "]"
	matchPrefixes(t, envtest.DescribeAll(got.envs), []string{
		"U(SPAWN a helper)", "TS",
		"S(Count files)" + s, "A(SUBAGENT_TASK: count the files here)" + s,
		"A(Done. The tool finished.)[usage]",
		"TCS(toolu_fake0005,Bash,List files in the subagent,", "TCE(toolu_fake0005)" + s + "[result=a.txt",
		"A(Subagent: the directory holds a few files.)" + s,
		"P" + s,
		"SVC(Agent “Count files” completed)",
		"A(hi there from the fake model)",
	})
	for _, e := range got.envs {
		if e.Role == protocol.RoleUser && strings.Contains(e.Ev.Text, "task-notification") {
			t.Fatal("task notification shown as a user prompt")
		}
	}
	if got.stats.Files != 2 {
		t.Fatalf("read %d files, want main + subagent", got.stats.Files)
	}
}

// The other 2.1.330 captures: plain reply, tool round trip, thinking.
func TestClaudeCode2_1_330(t *testing.T) {
	base := corpusDir + "/claude-code-2.1.330/"
	tests := []struct {
		path string
		want []string
	}{
		{"say-hi/transcripts/-home-dev-project/d83aa5ad-de94-4b51-a9ae-d6e89d27d795.jsonl", []string{"U(", "TS", "A("}},
		{"tool-bash/transcripts/-home-dev-project/f3c00ff8-acc8-40a5-8381-28d40134d6cd.jsonl", []string{"U(", "TS", "A(", "TCS(", "TCE(", "A("}},
		{"thinking/transcripts/-home-dev-project/87a678c1-a647-4eff-91c0-b74424e2c3c6.jsonl", []string{"U(", "TS", "A(", "A("}},
	}
	for _, tt := range tests {
		got := replayFile(t, base+tt.path)
		d := envtest.DescribeAll(got.envs)
		matchPrefixes(t, d, tt.want)
		if got.stats.Conversation*4 > got.stats.Lines {
			t.Errorf("%s: %d of %d records are conversation; expected most to be skipped (D14)", tt.path, got.stats.Conversation, got.stats.Lines)
		}
	}
}
