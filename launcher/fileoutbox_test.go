package launcher

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
)

func textEnvs(session string, from, to int) []protocol.Envelope {
	var out []protocol.Envelope
	for i := from; i < to; i++ {
		out = append(out, protocol.Envelope{ID: protocol.DeriveID(session, fmt.Sprint(i)), Time: int64(i + 1), Role: protocol.RoleUser,
			Ev: protocol.Event{T: protocol.KindText, Text: fmt.Sprint(i)}})
	}
	return out
}

// readOut returns the lines of an outbox file, per session, checking that
// each is an envelope with its session first.
func readOut(t *testing.T, path string) map[string][]protocol.Envelope {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]protocol.Envelope{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var s struct {
			Session string `json:"session"`
		}
		var e protocol.Envelope
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil || !strings.HasPrefix(sc.Text(), `{"session":`) {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out[s.Session] = append(out[s.Session], e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Two processes' outboxes on one --out file, appending at once: every line
// is whole, carries its session, and each session's envelopes are there
// once, in order.
func TestFileOutboxSharedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	sessions := []string{"11111111-2222-4333-8444-555555555555", "66666666-2222-4333-8444-555555555555"}
	var wg sync.WaitGroup
	for _, s := range sessions {
		o, err := OpenFileOutbox(path) // its own descriptor, as another process has
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		wg.Go(func() {
			for i := 0; i < 2000; i += 20 {
				if err := o.Append(context.Background(), s, textEnvs(s, i, i+20)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	got := readOut(t, path)
	for _, s := range sessions {
		if envIDs(got[s]) != envIDs(textEnvs(s, 0, 2000)) {
			t.Fatalf("session %s: %d envelopes", s, len(got[s]))
		}
	}
}

// The default outbox keeps one file per session, reads a session's ids only
// when the session is first appended to, and stores an id once across a
// reopen; a session id that is not a UUID names no file.
func TestSessionOutbox(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sessions")
	const a, b = "11111111-2222-4333-8444-555555555555", "66666666-2222-4333-8444-555555555555"
	o, err := OpenSessionOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	o.Append(context.Background(), a, textEnvs(a, 0, 5))
	o.Append(context.Background(), b, textEnvs(b, 0, 3))
	o.Close()
	o, err = OpenSessionOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Append(context.Background(), a, textEnvs(a, 3, 8)); err != nil {
		t.Fatal(err)
	}
	if err := o.Append(context.Background(), "../x", textEnvs(a, 0, 1)); err == nil {
		t.Fatal("a session id that is not a UUID was taken")
	}
	o.Close()
	if got := readOut(t, filepath.Join(dir, a+".jsonl"))[a]; envIDs(got) != envIDs(textEnvs(a, 0, 8)) {
		t.Fatalf("session a: %d envelopes", len(got))
	}
	if got := readOut(t, filepath.Join(dir, b+".jsonl"))[b]; envIDs(got) != envIDs(textEnvs(b, 0, 3)) {
		t.Fatalf("session b: %d envelopes", len(got))
	}
}

// A shared file is read for ids only over its last FileOutboxDedupeWindow
// bytes: what a crash re-delivers is found there; reading costs no more
// than the window, whatever the file's size.
func TestFileOutboxDedupeWindow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	const s = "11111111-2222-4333-8444-555555555555"
	pad := strings.Repeat("x", 1<<20)
	f, _ := os.Create(path)
	for range FileOutboxDedupeWindow/(1<<20) + 2 {
		fmt.Fprintf(f, `{"session":"old","id":"old","time":1,"role":"user","ev":{"t":"text","text":%q}}`+"\n", pad)
	}
	f.Close()
	o, err := OpenFileOutbox(path)
	if err != nil {
		t.Fatal(err)
	}
	o.Append(context.Background(), s, textEnvs(s, 0, 3))
	o.Close()
	o, _ = OpenFileOutbox(path)
	o.Append(context.Background(), s, textEnvs(s, 0, 4)) // 0..2 again after a crash, and one more
	o.Close()
	if got := readOut(t, path)[s]; envIDs(got) != envIDs(textEnvs(s, 0, 4)) {
		t.Fatalf("got %d envelopes", len(got))
	}
}

func envIDs(es []protocol.Envelope) string {
	var s []string
	for _, e := range es {
		s = append(s, e.ID)
	}
	return strings.Join(s, " ")
}
