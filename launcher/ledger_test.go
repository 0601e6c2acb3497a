package launcher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The ledger answers a repeat with the recorded outcome, across a restart;
// a command begun and never finished is not carried out again; it keeps
// the newest MaxLedgerEntries ids and its file stays bounded.
func TestLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "commands.jsonl")
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	begin := func(l *Ledger, id string) (bool, error) {
		t.Helper()
		fresh, outcome, err := l.Begin(id)
		if err != nil {
			t.Fatal(err)
		}
		return fresh, outcome
	}
	if fresh, _ := begin(l, "cdone"); !fresh {
		t.Fatal("a new id is not fresh")
	}
	if _, outcome := begin(l, "cdone"); outcome != ErrInProgress {
		t.Fatalf("a repeat while it runs: %v", outcome)
	}
	l.Finish("cdone", nil)
	begin(l, "crejected")
	l.Finish("crejected", errors.New("no such request"))
	begin(l, "chalf") // the CLI stops before it ends
	l.Close()

	l, err = OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, tc := range []struct {
		id   string
		want string
	}{{"cdone", ""}, {"crejected", "no such request"}, {"chalf", ErrInterrupted.Error()}} {
		fresh, outcome := begin(l, tc.id)
		got := ""
		if outcome != nil {
			got = outcome.Error()
		}
		if fresh || got != tc.want {
			t.Errorf("%s after a restart: fresh %v, outcome %q, want %q", tc.id, fresh, got, tc.want)
		}
	}
	for i := range 2 * MaxLedgerEntries {
		id := fmt.Sprint("c", i)
		begin(l, id)
		l.Finish(id, nil)
	}
	if fresh, _ := begin(l, "cdone"); !fresh {
		t.Error("the oldest id is still remembered past MaxLedgerEntries")
	}
	if _, outcome := begin(l, fmt.Sprint("c", 2*MaxLedgerEntries-1)); outcome != nil {
		t.Errorf("the newest id forgotten: %v", outcome)
	}
	b, _ := os.ReadFile(path)
	if n := strings.Count(string(b), "\n"); n > 2*MaxLedgerEntries {
		t.Errorf("the ledger file holds %d lines", n)
	}
}

// A prompt begun with where its session's transcript stood keeps that
// point across a restart, while it is unfinished: the next run looks
// there for whether Claude took it.
func TestLedgerPromptStartedAt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "commands.jsonl")
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	for id, at := range map[string]int64{"p0": 0, "p1": 4096, "pdone": 10} {
		if fresh, _, err := l.BeginPrompt(id, at); err != nil || !fresh {
			t.Fatalf("%s: fresh %v, %v", id, fresh, err)
		}
	}
	l.Finish("pdone", nil)
	l.Close()
	if l, err = OpenLedger(path); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, tc := range []struct {
		id string
		at int64
		ok bool
	}{{"p0", 0, true}, {"p1", 4096, true}, {"pdone", 0, false}, {"other", 0, false}} {
		if at, ok := l.StartedAt(tc.id); at != tc.at || ok != tc.ok {
			t.Errorf("%s: %d %v, want %d %v", tc.id, at, ok, tc.at, tc.ok)
		}
	}
	if _, outcome, _ := l.Begin("p1"); outcome != ErrInterrupted {
		t.Fatalf("a prompt begun before the restart: %v", outcome)
	}
}
