package relay

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func items(ids ...string) []Item {
	out := make([]Item, len(ids))
	for i, id := range ids {
		out[i] = Item{ID: id, Body: []byte(fmt.Sprintf(`{"id":%q}`, id))}
	}
	return out
}

func openTestStore(t testing.TB, path string) *Store {
	t.Helper()
	s, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStoreAppendIdempotent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "relay.db")
	s := openTestStore(t, path)
	seqs, err := seqsOf(s.Append(ctx, "s1", items("a", "b", "c")))
	if err != nil || fmt.Sprint(seqs) != "[1 2 3]" {
		t.Fatalf("seqs %v, %v", seqs, err)
	}
	// A resent envelope gets its existing number; new ones continue.
	seqs, err = seqsOf(s.Append(ctx, "s1", items("b", "d", "a", "e")))
	if err != nil || fmt.Sprint(seqs) != "[2 4 1 5]" {
		t.Fatalf("seqs %v, %v", seqs, err)
	}
	// Sessions count separately.
	if seqs, _ := seqsOf(s.Append(ctx, "s2", items("a"))); fmt.Sprint(seqs) != "[1]" {
		t.Fatalf("s2 seqs %v", seqs)
	}
	got, err := s.Read(ctx, "s1", 2, 10)
	if err != nil || len(got) != 3 || got[0].ID != "c" || got[2].Seq != 5 || string(got[2].Body) != `{"id":"e"}` {
		t.Fatalf("read %+v, %v", got, err)
	}
	if _, err := s.Append(ctx, "s1", []Item{{ID: "", Body: []byte("{}")}}); err == nil {
		t.Fatal("envelope without id accepted")
	}
	// A failed batch stores nothing of itself.
	if _, err := s.Append(ctx, "s1", append(items("f"), Item{})); err == nil {
		t.Fatal("bad batch accepted")
	}
	if last, _ := s.LastSeq(ctx, "s1"); last != 5 {
		t.Fatalf("last seq %d after a failed batch", last)
	}
	// Everything survives a reopen.
	s.Close()
	s2 := openTestStore(t, path)
	if last, _ := s2.LastSeq(ctx, "s1"); last != 5 {
		t.Fatalf("last seq after reopen %d", last)
	}
	if seqs, _ := seqsOf(s2.Append(ctx, "s1", items("e", "g"))); fmt.Sprint(seqs) != "[5 6]" {
		t.Fatalf("after reopen %v", seqs)
	}
}

// Concurrent appenders and readers: numbers stay dense and unique.
func TestStoreConcurrent(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				if _, err := s.Append(ctx, "s1", items(fmt.Sprintf("w%d-%d", w, i), fmt.Sprintf("shared-%d", i))); err != nil {
					t.Error(err)
					return
				}
			}
		})
		wg.Go(func() {
			for range 50 {
				if _, err := s.Read(ctx, "s1", 0, 100); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	all, err := s.Read(ctx, "s1", 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 250 {
		t.Fatalf("%d stored, want 250 (200 own + 50 shared)", len(all))
	}
	seen := map[string]bool{}
	for i, st := range all {
		if st.Seq != int64(i+1) || seen[st.ID] {
			t.Fatalf("row %d: seq %d id %s", i, st.Seq, st.ID)
		}
		seen[st.ID] = true
	}
}

// BenchmarkStoreAppend: envelopes stored per second in batches of 100.
func BenchmarkStoreAppend(b *testing.B) {
	ctx := context.Background()
	s, err := OpenStore(filepath.Join(b.TempDir(), "relay.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	body := []byte(`{"id":"c0000000000000000000000","time":1795373975149,"role":"agent","turn":"ca5cb6281a9d7b15959b999f","ev":{"t":"text","text":"Done. The tool finished."}}`)
	batch := make([]Item, 100)
	n := 0
	b.ResetTimer()
	for b.Loop() {
		for i := range batch {
			n++
			batch[i] = Item{ID: fmt.Sprintf("c%023d", n), Body: body}
		}
		if _, err := s.Append(ctx, "s1", batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "envelopes/s")
}

// The list shows a session's first real prompt: not agent text, not a
// subagent's prompt, not slash-command markup; whitespace folded, cut.
func TestStoreFirstPrompt(t *testing.T) {
	long := strings.Repeat("é", 300)
	tests := []struct {
		name    string
		batches [][]string
		want    string
	}{
		{"agent text first", [][]string{{`{"role":"agent","turn":"t","ev":{"t":"text","text":"hello"}}`, `{"role":"user","ev":{"t":"text","text":"  fix\n the   tests "}}`}}, "fix the tests"},
		{"kept across batches", [][]string{{`{"role":"user","ev":{"t":"text","text":"first"}}`}, {`{"role":"user","ev":{"t":"text","text":"second"}}`}}, "first"},
		{"markup and subagent skipped", [][]string{{`{"role":"user","ev":{"t":"text","text":"<command-name>/model</command-name>"}}`, `{"role":"user","subagent":"cabc","ev":{"t":"text","text":"sub"}}`}, {`{"role":"user","ev":{"t":"text","text":"real"}}`}}, "real"},
		{"empty text skipped", [][]string{{`{"role":"user","ev":{"t":"text","text":" "}}`, `{"role":"user","ev":{"t":"file","ref":"r","name":"n","size":1}}`}}, ""},
		{"cut on a character", [][]string{{`{"role":"user","ev":{"t":"text","text":"` + long + `"}}`}}, strings.Repeat("é", maxPrompt-1) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "relay.db")
			s := openTestStore(t, path)
			n := 0
			for _, b := range tt.batches {
				var its []Item
				for _, body := range b {
					n++
					its = append(its, Item{ID: fmt.Sprint("e", n), Body: []byte(body)})
				}
				if _, err := s.Append(ctx, "s1", its); err != nil {
					t.Fatal(err)
				}
			}
			list, err := s.Sessions(ctx)
			if err != nil || len(list) != 1 || list[0].Prompt != tt.want {
				t.Fatalf("sessions %+v, %v; want prompt %q", list, err, tt.want)
			}
		})
	}
}

// seqsOf keeps the sequence numbers of an Append's result.
func seqsOf(res []Appended, err error) ([]int64, error) {
	var out []int64
	for _, r := range res {
		out = append(out, r.Seq)
	}
	return out, err
}

// A database whose commands table is keyed by id alone (older versions)
// keeps its commands, now under their session's owner.
func TestStoreMigratesCommands(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE sessions (id TEXT PRIMARY KEY, info TEXT NOT NULL DEFAULT '{}', owner TEXT NOT NULL DEFAULT '', last_seq INTEGER NOT NULL DEFAULT 0, prompt TEXT NOT NULL DEFAULT '', created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL)`,
		`CREATE TABLE commands (id TEXT PRIMARY KEY, session TEXT NOT NULL, body BLOB NOT NULL, status TEXT NOT NULL, message TEXT NOT NULL DEFAULT '', created_ms INTEGER NOT NULL)`,
		`CREATE INDEX commands_by_session ON commands (session, status, created_ms)`,
		`INSERT INTO sessions (id, owner, created_ms, updated_ms) VALUES ('` + s1 + `', 'o1', 1, 1)`,
		`INSERT INTO commands VALUES ('p1', '` + s1 + `', '{"id":"p1","kind":"prompt"}', 'queued', '', 5)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	st := openTestStore(t, path)
	q, err := st.PendingCommands(context.Background(), "o1", s1)
	if err != nil || len(q) != 1 || q[0].ID != "p1" {
		t.Fatalf("%v %v", q, err)
	}
	if _, isNew, err := st.AddCommand(context.Background(), "o2", s1, "p1", []byte(`{}`), "queued", ""); err != nil || !isNew {
		t.Fatalf("another owner's p1: new=%v %v", isNew, err)
	}
}
