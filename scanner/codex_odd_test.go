package scanner

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A rollout line whose ordinal is far past any the file can have (hostile
// or damaged input) is skipped with a log: taken as read, it made every
// later line look had, and the thread stopped being followed.
func TestCodexHugeOrdinalSkipped(t *testing.T) {
	for _, huge := range []int64{math.MaxInt64, 1 << 40, MaxCodexOrdinalGap + 10} {
		t.Run(fmt.Sprint(huge), func(t *testing.T) {
			path := rolloutPath(t)
			odd := fmt.Sprintf(`{"timestamp":"2026-11-27T15:46:37.500Z","ordinal":%d,"type":"event_msg","payload":{}}`+"\n", huge)
			appendFile(t, path, rolloutLine(0, "session_meta")+rolloutLine(1, "event_msg")+odd+rolloutLine(3, "event_msg"))
			sink := newCodexSink()
			runFollower(t, CodexConfig{NoWatch: true, PollInterval: 20e6}, sink, path)
			appendFile(t, path, rolloutLine(4, "event_msg"))
			got := ordinals(sink.waitLines(t, 4))
			if !slices.Equal(got, []int64{0, 1, 3, 4}) {
				t.Fatalf("ordinals %v, want [0 1 3 4]", got)
			}
		})
	}
}

// A subagent Codex starts after midnight has its rollout in the next
// day's folder (sessions/YYYY/MM/DD, by the day a thread starts): it is
// found there and followed with its parent, as one beside it is.
func TestCodexSubagentAfterMidnight(t *testing.T) {
	const sub = "01a21dbb-e0d9-7522-8d58-c59df541000b"
	sessions := filepath.Join(t.TempDir(), "sessions")
	parentDir := filepath.Join(sessions, "2026", "12", "31")
	nextDir := filepath.Join(sessions, "2027", "01", "01")
	for _, d := range []string{parentDir, nextDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	parent := filepath.Join(parentDir, "rollout-2026-12-31T23-59-50-"+codexThread+".jsonl")
	appendFile(t, parent, `{"timestamp":"2026-12-31T23:59:50.000Z","ordinal":0,"type":"session_meta","payload":{"id":"`+codexThread+`"}}`+"\n")
	sink := newCodexSink()
	runFollower(t, CodexConfig{NoWatch: true, PollInterval: 20e6}, sink, parent)
	sink.waitLines(t, 1)
	child := filepath.Join(nextDir, "rollout-2027-01-01T00-00-05-"+sub+".jsonl")
	appendFile(t, child, `{"timestamp":"2027-01-01T00:00:05.000Z","ordinal":0,"type":"session_meta","payload":{"id":"`+sub+`","parent_thread_id":"`+codexThread+`"}}`+"\n"+
		`{"timestamp":"2027-01-01T00:00:06.000Z","ordinal":1,"type":"event_msg","payload":{}}`+"\n")
	appendFile(t, parent, `{"timestamp":"2027-01-01T00:00:07.000Z","ordinal":1,"type":"event_msg","payload":{}}`+"\n")
	got := sink.waitLines(t, 4)
	var fromSub int
	for _, l := range got {
		if l.Thread == sub {
			fromSub++
		}
	}
	if fromSub != 2 {
		t.Fatalf("%d lines of the subagent's thread delivered, want 2: %+v", fromSub, got)
	}
}
