package replay

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestProgressBar(t *testing.T) {
	t0 := time.Unix(0, 0)
	now := t0
	var buf bytes.Buffer
	p := NewProgressBar(&buf, func() time.Time { return now })
	p.Update(1, ProgressThreshold-1)
	p.Clear()
	if buf.Len() != 0 {
		t.Fatalf("small input drew %q", buf.String())
	}
	p.Update(0, 100e6)
	now = t0.Add(2 * time.Second)
	p.Update(50e6, 100e6)
	got := buf.String()
	if !strings.Contains(got, " 50%  50/100 MB  25 MB/s") || !strings.Contains(got, strings.Repeat("█", 15)+strings.Repeat("░", 15)) {
		t.Fatalf("bar %q", got)
	}
	p.Clear()
	if !strings.HasSuffix(buf.String(), "\r\x1b[2K") {
		t.Fatal("not cleared")
	}
}
