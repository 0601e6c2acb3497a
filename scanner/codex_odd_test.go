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

// A rollout whose name says thread X but whose session_meta is thread Y's
// (a copy or a rename), naming a followed thread as parent, is not
// followed as X's subagent; a true subagent beside it is.
func TestCodexSubagentMetaNamesItsThread(t *testing.T) {
	const (
		named  = "01a21dbb-e0d9-7522-8d58-c59df541000c" // the file name's
		inMeta = "01a21dbb-e0d9-7522-8d58-c59df541000d" // its session_meta's
		sub    = "01a21dbb-e0d9-7522-8d58-c59df541000e" // a true subagent
	)
	parent := rolloutPath(t)
	dir := filepath.Dir(parent)
	appendFile(t, parent, `{"timestamp":"2026-11-27T15:46:37.000Z","ordinal":0,"type":"session_meta","payload":{"id":"`+codexThread+`"}}`+"\n")
	sink := newCodexSink()
	runFollower(t, CodexConfig{NoWatch: true, PollInterval: 20e6}, sink, parent)
	sink.waitLines(t, 1)
	for _, c := range []struct{ file, id string }{{named, inMeta}, {sub, sub}} {
		appendFile(t, filepath.Join(dir, "rollout-2026-11-27T15-46-40-"+c.file+".jsonl"),
			`{"timestamp":"2026-11-27T15:46:40.000Z","ordinal":0,"type":"session_meta","payload":{"id":"`+c.id+`","parent_thread_id":"`+codexThread+`"}}`+"\n"+
				`{"timestamp":"2026-11-27T15:46:41.000Z","ordinal":1,"type":"event_msg","payload":{}}`+"\n")
	}
	appendFile(t, parent, `{"timestamp":"2026-11-27T15:46:42.000Z","ordinal":1,"type":"event_msg","payload":{}}`+"\n")
	got := sink.waitLines(t, 4) // both of the parent's, both of the subagent's
	// The parent's second line is delivered after both rollouts were
	// judged (in the same pass, before it): nothing of named's comes later.
	byThread := map[string]int{}
	for _, l := range got {
		byThread[l.Thread]++
	}
	if byThread[named] != 0 || byThread[inMeta] != 0 || byThread[sub] != 2 || byThread[codexThread] != 2 {
		t.Fatalf("lines by thread %v: want 2 of the parent's, 2 of the subagent's, none of the renamed rollout", byThread)
	}
}
