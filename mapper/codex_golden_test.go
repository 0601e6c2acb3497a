package mapper

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
)

var updateCodex = flag.Bool("update", false, "rewrite the golden files of the Codex mapping")

// codexFixtures are the rollouts the Codex goldens cover: the samples, and
// the fixtures generated with the real Codex for its tested version.
func codexFixtures(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, dir := range []string{"samples", codex.TestedVersion} {
		m, err := filepath.Glob(filepath.Join("..", "codex", "testdata", dir, "*.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			// <scenario>.rpc.jsonl is an app-server exchange, not a rollout.
			if !strings.HasSuffix(f, ".rpc.jsonl") {
				files = append(files, f)
			}
		}
	}
	if len(files) == 0 {
		t.Fatal("no Codex rollouts to map")
	}
	return files
}

// subRollouts are the rollouts of the subagent threads of the fixture
// path: <scenario>.2.jsonl, <scenario>.3.jsonl, … beside <scenario>.jsonl.
func subRollouts(path string) []string {
	base := strings.TrimSuffix(path, ".jsonl")
	if strings.Contains(filepath.Base(base), ".") {
		return nil // itself a subagent's
	}
	var out []string
	for i := 2; ; i++ {
		p := base + "." + strconv.Itoa(i) + ".jsonl"
		if _, err := os.Stat(p); err != nil {
			return out
		}
		out = append(out, p)
	}
}

func readRollout(t *testing.T, path string) []*codex.Record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*codex.Record
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, codex.MaxLineBytes)
	for sc.Scan() {
		r, err := codex.Parse(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 || recs[0].SessionMeta == nil {
		t.Fatalf("%s does not start with session_meta", path)
	}
	return recs
}

// mapRollout maps a rollout as replay does: each line in order, the
// session id from its session_meta, the rollouts of its subagent threads
// (subs) merged in by time, and what is held flushed at the end.
func mapRollout(t *testing.T, path string, subs ...string) []protocol.Envelope {
	t.Helper()
	files := [][]*codex.Record{readRollout(t, path)}
	threads := []string{""}
	for _, p := range subs {
		recs := readRollout(t, p)
		files = append(files, recs)
		threads = append(threads, recs[0].SessionMeta.ID)
	}
	c := NewCodex(files[0][0].SessionMeta.ID)
	var out []protocol.Envelope
	for {
		best := -1
		for i, recs := range files {
			if len(recs) > 0 && (best < 0 || recs[0].Timestamp < files[best][0].Timestamp) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		r := files[best][0]
		files[best] = files[best][1:]
		if threads[best] == "" {
			out = append(out, c.Map(r)...)
		} else {
			out = append(out, c.MapThread(threads[best], r)...)
		}
	}
	return append(out, c.Flush()...)
}

func encodeAll(t *testing.T, envs []protocol.Envelope) []byte {
	t.Helper()
	var buf bytes.Buffer
	for i := range envs {
		if err := envs[i].Validate(); err != nil {
			t.Fatalf("envelope %d invalid: %v\n%+v", i, err, envs[i])
		}
		b, err := envs[i].MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// TestCodexGolden maps every Codex rollout fixture and compares the
// envelopes with its golden file (-update rewrites them). Every envelope
// is valid, and mapping the same rollout again gives the same bytes.
func TestCodexGolden(t *testing.T) {
	for _, f := range codexFixtures(t) {
		name := filepath.Base(filepath.Dir(f)) + "_" + strings.TrimSuffix(filepath.Base(f), ".jsonl")
		t.Run(name, func(t *testing.T) {
			subs := subRollouts(f)
			got := encodeAll(t, mapRollout(t, f, subs...))
			if again := encodeAll(t, mapRollout(t, f, subs...)); !bytes.Equal(got, again) {
				t.Fatal("mapping the same rollout twice gave different envelopes")
			}
			golden := filepath.Join("testdata", "codex", name+".golden")
			if *updateCodex {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("envelopes differ from %s (run with -update and read the diff): %s", golden, firstDiff(got, want))
			}
		})
	}
}

// firstDiff says where two envelope streams first differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n got %s\nwant %s", i+1, a, b)
		}
	}
	return "same lines"
}
