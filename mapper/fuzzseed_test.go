package mapper

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/internal/jsonscan"
)

// maxSeed bounds a seed of the mapper's fuzz targets. The fuzzing engine
// minimizes every input that finds new coverage by running the target on
// it again with each byte removed, then with each span removed: a cost
// that grows with the square of the input's length. Seeds made of whole
// transcripts (33 KB and 154 KB) kept it minimizing the first such input
// for the whole run, the count of runs stuck at about ten.
const maxSeed = 2048

// cutString bounds a string value of a seed record: a longer one keeps
// its head and its tail (where tags such as a task notification's open
// and close), so the record keeps its shape at a size the fuzzer can work
// with.
const cutString = 160

// claudeSeeds are the seeds of FuzzMapper: real records of the
// transcripts in testdata, in windows of consecutive records.
func claudeSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	files := []string{
		"../testdata/corpus/happy-fixtures/task_non_sdk.jsonl",
		"../testdata/corpus/happy-fixtures/permission-prompt-aborted-with-interrupt.jsonl",
		"../testdata/corpus/happy-fixtures/1-continue-run-ls-tool.jsonl",
		"../testdata/corpus/happy-fixtures/task_sdk.jsonl",
		"../testdata/corpus/public/claude-code-log/test/test_data/edge_cases.jsonl",
		"../testdata/corpus/public/claude-code-log/test/test_data/system_model_change.jsonl",
		"../testdata/corpus/public/claude-code-log/test/test_data/async_agents/eb000000-0000-4000-8000-000000000001.jsonl",
		"../testdata/corpus/public/spotter/test/fixtures/transcripts/short.jsonl",
		"../testdata/corpus/claude-code-2.1.197/api-retry-late/answered.jsonl",
	}
	bg, _ := filepath.Glob("../testdata/corpus/claude-code-2.1.330/agent-background/transcripts/*/*.jsonl")
	return seedWindows(tb, append(files, bg...))
}

// codexSeeds are the seeds of FuzzCodexMap: real lines of the sample
// rollouts, in windows of consecutive lines.
func codexSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "codex", "testdata", "samples", "*.jsonl"))
	return seedWindows(tb, files)
}

// seedWindows reads the JSONL files, cuts each record's long strings
// (shrinkJSON) and packs consecutive records into seeds of at most maxSeed
// bytes. A line that is not JSON is kept as it is when it is short (a torn
// line is worth a seed), left out otherwise.
func seedWindows(tb testing.TB, files []string) [][]byte {
	tb.Helper()
	if len(files) == 0 {
		tb.Fatal("no seed files")
	}
	var seeds [][]byte
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		var window []byte
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			if json.Valid(line) {
				line = shrinkJSON(line)
			}
			if len(line) == 0 || len(line) > maxSeed {
				continue
			}
			if len(window) > 0 && len(window)+1+len(line) > maxSeed {
				seeds = append(seeds, window)
				window = nil
			}
			if len(window) > 0 {
				window = append(window, '\n')
			}
			window = append(window, line...)
		}
		if len(window) > 0 {
			seeds = append(seeds, window)
		}
	}
	return seeds
}

// shrinkJSON returns the valid JSON value v with every string longer than
// cutString cut to its head and tail, members and elements in their order.
func shrinkJSON(v []byte) []byte {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return v
	}
	switch v[0] {
	case '{':
		out := []byte{'{'}
		jsonscan.EachMember(v, func(k, val []byte) error {
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = appendJSONString(out, string(k))
			out = append(out, ':')
			out = append(out, shrinkJSON(val)...)
			return nil
		})
		return append(out, '}')
	case '[':
		out := []byte{'['}
		jsonscan.EachElem(v, func(val []byte) error {
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = append(out, shrinkJSON(val)...)
			return nil
		})
		return append(out, ']')
	case '"':
		if len(v) <= cutString {
			return v
		}
		s, ok := jsonscan.String(v)
		if !ok || len(s) <= cutString {
			return v
		}
		head, tail := cutString/2, len(s)-cutString/2
		for head > 0 && !utf8.RuneStart(s[head]) {
			head--
		}
		for tail < len(s) && !utf8.RuneStart(s[tail]) {
			tail++
		}
		return appendJSONString(nil, s[:head]+"…"+s[tail:])
	default:
		return v
	}
}

// appendJSONString appends s as a JSON string, without encoding/json's
// escapes of <, > and &, as Claude Code and Codex write them.
func appendJSONString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// TestFuzzSeeds: the seeds of the mapper's fuzz targets are small (see
// maxSeed), are real records (each line parses), and together still hold
// every kind of record the transcripts they come from hold.
func TestFuzzSeeds(t *testing.T) {
	type kinds = map[string]bool
	claudeKind := func(line []byte) (string, bool) {
		r, err := claude.Parse(line)
		if err != nil {
			return "", false
		}
		return r.Type, true
	}
	codexKind := func(line []byte) (string, bool) {
		r, err := codex.Parse(line)
		if err != nil {
			return "", false
		}
		return r.Type, true
	}
	for _, tc := range []struct {
		name  string
		seeds func(testing.TB) [][]byte
		kind  func([]byte) (string, bool)
		want  []string
	}{
		{"FuzzMapper", claudeSeeds, claudeKind, []string{"user", "assistant", "system", "summary", "attachment"}},
		{"FuzzCodexMap", codexSeeds, codexKind, []string{"session_meta", "turn_context", "event_msg", "response_item"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seeds := tc.seeds(t)
			if len(seeds) < 10 {
				t.Errorf("%d seeds", len(seeds))
			}
			seen := kinds{}
			for i, s := range seeds {
				if len(s) > maxSeed {
					t.Errorf("seed %d is %d bytes, more than %d", i, len(s), maxSeed)
				}
				for line := range bytes.SplitSeq(s, []byte("\n")) {
					if k, ok := tc.kind(line); ok {
						seen[k] = true
					}
				}
			}
			for _, k := range tc.want {
				if !seen[k] {
					t.Errorf("no seed holds a %s record", k)
				}
			}
			// The seeds found by the fuzzer and kept beside the target
			// are seeds too.
			kept, _ := filepath.Glob(filepath.Join("testdata", "fuzz", tc.name, "*"))
			for _, name := range kept {
				fi, err := os.Stat(name)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Size() > 4*maxSeed {
					t.Errorf("%s: %d bytes", name, fi.Size())
				}
			}
		})
	}
}
