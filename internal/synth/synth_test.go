package synth

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteRewritesIDsPerCopy(t *testing.T) {
	src := `{"type":"user","uuid":"0b5c1f3e-1111-4222-8333-444455556666","parentUuid":null,"message":{"id":"msg_01ABC","content":"hi"}}` + "\n"
	p := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := Write(&buf, int64(3*len(src)-5), s)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("reported %d bytes, wrote %d", n, buf.Len())
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines", len(lines))
	}
	for k, l := range lines {
		suffix := "-" + string(rune('0'+k))
		if !strings.Contains(l, `"uuid":"0b5c1f3e-1111-4222-8333-444455556666`+suffix+`"`) || !strings.Contains(l, `"id":"msg_01ABC`+suffix+`"`) {
			t.Fatalf("copy %d: %s", k, l)
		}
	}
}
