package happybench

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// gitBlobID is git hash-object's id of b.
func gitBlobID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// Every file under ts/ is happy's, byte for byte: its git blob id is the
// upstream one README.md lists, and README.md lists every file there.
func TestVendoredFilesUnmodified(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), Commit) {
		t.Fatalf("README.md does not name the commit %s", Commit)
	}
	rows := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| (\\d+) \\| `([0-9a-f]{40})` \\|$").FindAllStringSubmatch(string(readme), -1)
	want := map[string]string{}
	for _, r := range rows {
		want[r[1]] = r[3]
	}
	if len(want) < 10 {
		t.Fatalf("README.md lists %d files: the pattern is wrong", len(want))
	}
	var got []string
	err = filepath.WalkDir("ts", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel("ts", p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		got = append(got, rel)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		id, ok := want[rel]
		switch {
		case !ok:
			t.Errorf("ts/%s is not listed in README.md", rel)
		case gitBlobID(b) != id:
			t.Errorf("ts/%s is not upstream's %s (it is %s): vendored files stay unmodified", rel, id, gitBlobID(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range want {
		if !slices.Contains(got, p) {
			t.Errorf("README.md lists %s, missing from ts/", p)
		}
	}
	for _, p := range []string{"LICENSE", "packages/happy-cli/src/claude/utils/sessionProtocolMapper.ts"} {
		if !slices.Contains(got, p) {
			t.Errorf("ts/%s is missing", p)
		}
	}
}

// CI installs the packages the driver is bundled with, at the pinned
// versions, where CCRELAY_TEST_HAPPY points.
func TestCIPinsHappyPackages(t *testing.T) {
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^HAPPY_PACKAGES=\(([^)]*)\)$`).FindSubmatch(ci)
	if m == nil {
		t.Fatal(".ci/run sets no HAPPY_PACKAGES=(...)")
	}
	if got := strings.Fields(string(m[1])); !slices.Equal(got, Packages) {
		t.Fatalf(".ci/run installs %q, happybench.Packages is %q", got, Packages)
	}
	c := regexp.MustCompile(`(?m)^HAPPY_COMMIT=(\S+)$`).FindSubmatch(ci)
	if c == nil || string(c[1]) != Commit {
		t.Fatalf(".ci/run's HAPPY_COMMIT is %q, want %s", c, Commit)
	}
	if !strings.Contains(string(ci), "export CCRELAY_TEST_HAPPY\n") {
		t.Fatal(".ci/run does not export CCRELAY_TEST_HAPPY")
	}
}

// A folder whose packages are missing or at other versions is refused.
func TestCheckInstalled(t *testing.T) {
	write := func(t *testing.T, dir string, versions map[string]string) {
		for name, v := range versions {
			p := filepath.Join(dir, "node_modules", name, "package.json")
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(`{"name":"`+name+`","version":"`+v+`"}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	pinned := map[string]string{}
	for _, p := range Packages {
		i := strings.LastIndex(p, "@")
		pinned[p[:i]] = p[i+1:]
	}
	tests := []struct {
		name   string
		change func(map[string]string)
		ok     bool
	}{
		{"pinned", func(map[string]string) {}, true},
		{"other zod", func(m map[string]string) { m["zod"] = "3.25.76" }, false},
		{"no esbuild", func(m map[string]string) { delete(m, "esbuild") }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]string{}
			for k, v := range pinned {
				m[k] = v
			}
			tt.change(m)
			dir := t.TempDir()
			write(t, dir, m)
			if err := CheckInstalled(dir); (err == nil) != tt.ok {
				t.Fatalf("CheckInstalled: %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// The bundled driver runs happy's mapper: a transcript of one prompt, one
// tool call and an answer maps to a turn with its call, and a line happy's
// schema refuses, a repeated message and an internal event are skipped as
// happy's scanner skips them.
func TestDriverMapsTranscript(t *testing.T) {
	bundle := Build(t)
	lines := []string{
		`{"type":"user","uuid":"u1","message":{"role":"user","content":"list the files"}}`,
		`{"type":"file-history-snapshot","messageId":"x"}`,
		`{"type":"assistant","uuid":"a1","message":{"role":"assistant","content":[{"type":"text","text":"Sure."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls","description":"List files"}}]}}`,
		`{"type":"assistant","uuid":"a1","message":{"role":"assistant","content":[{"type":"text","text":"Sure."}]}}`,
		`{"type":"user","uuid":"u2","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a.txt"}]}}`,
		`{"type":"assistant","message":{"content":[{"type":"text","text":"no uuid: refused by the schema"}]}}`,
		`not json`,
		`{"type":"assistant","uuid":"a2","message":{"role":"assistant","content":[{"type":"text","text":"One file."}]}}`,
		`{"type":"user","uuid":"u3","message":{"role":"user","content":"thanks"}}`,
	}
	p := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := Run(ctx, bundle, p, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"text": 4, "turn-start": 1, "tool-call-start": 1, "tool-call-end": 1, "turn-end": 1}
	if r.Messages != 5 || r.Duplicates != 1 || r.Envelopes != 8 || fmt.Sprint(r.Kinds) != fmt.Sprint(want) {
		t.Fatalf("summary %+v, want 5 messages, 1 duplicate, 8 envelopes %v", r.Summary, want)
	}
	if len(r.JSON) != r.Envelopes {
		t.Fatalf("%d envelopes as JSON, summary says %d", len(r.JSON), r.Envelopes)
	}
	for i, w := range []string{`"role":"user"`, `"t":"turn-start"`, `"text":"Sure."`, `"t":"tool-call-start"`, `"t":"tool-call-end"`, `"text":"One file."`, `"t":"turn-end"`, `"text":"thanks"`} {
		if !strings.Contains(string(r.JSON[i]), w) {
			t.Errorf("envelope %d %s, want %s", i, r.JSON[i], w)
		}
	}
	if r.Wall <= 0 {
		t.Fatalf("wall time %v", r.Wall)
	}
}
