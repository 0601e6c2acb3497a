package codex

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: Parse never panics, and what it accepts has a consistent
// shape: a known type that parsed has its typed payload.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "samples", "*.jsonl"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, MaxLineBytes)
		for sc.Scan() {
			if len(sc.Bytes()) < 4096 {
				f.Add(append([]byte(nil), sc.Bytes()...))
			}
		}
	}
	f.Add([]byte(`{"type":"event_msg","payload":{"type":"item_completed","item":{"type":"FileChange","changes":{"a":{"type":"add","content":"x"}}}}}`))
	f.Add([]byte(`{"type":"response_item","payload":{"type":"function_call_output","output":{"content":[{"text":"x"}]}}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := Parse(line)
		if err != nil {
			return
		}
		switch r.Type {
		case TypeSessionMeta:
			if r.SessionMeta == nil {
				t.Fatal("session_meta without its payload")
			}
			_ = r.SessionMeta.SourceName()
		case TypeTurnContext:
			if r.TurnContext == nil {
				t.Fatal("turn_context without its payload")
			}
			_ = r.TurnContext.SandboxType()
		case TypeEventMsg:
			if r.Event == nil {
				t.Fatal("event_msg without its payload")
			}
			if r.Event.Item != nil {
				_ = r.Event.Item.Text()
			}
		case TypeResponseItem:
			if r.Item == nil {
				t.Fatal("response_item without its payload")
			}
			_, _ = r.Item.Text(), r.Item.OutputText()
			if r.Item.Type == ItemCustomToolCall {
				p, _ := ParsePatch(r.Item.Input)
				_ = p.Paths()
			}
		case TypeTokenUsageRecord:
			if r.Usage == nil {
				t.Fatal("token_usage_record without its payload")
			}
		}
		if r.HasOrdinal && r.Ordinal < 0 {
			t.Fatal("negative ordinal taken")
		}
	})
}

// FuzzParsePatch: ParsePatch never panics and keeps to its bounds.
func FuzzParsePatch(f *testing.F) {
	f.Add("*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\n")
	f.Add("*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@ ctx\n x\n-y\n+z\n\n*** Delete File: c\n*** End Patch")
	f.Add("*** Begin Patch\n*** Update File: a\n-y\n+z")
	f.Fuzz(func(t *testing.T, s string) {
		p, _ := ParsePatch(s)
		if len(p.Files) > MaxPatchFiles {
			t.Fatalf("%d files", len(p.Files))
		}
		_ = p.Paths()
	})
}
