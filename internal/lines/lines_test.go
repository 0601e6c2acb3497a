package lines

import (
	"io"
	"strings"
	"testing"
)

func TestReader(t *testing.T) {
	in := "a\r\n\nlong-" + strings.Repeat("x", 100) + "\nb\npartial"
	lr := NewReader(strings.NewReader(in), 16, 20)
	type want struct {
		data     string
		size     int64
		tooLong  bool
		complete bool
	}
	for i, w := range []want{{"a", 3, false, true}, {"", 1, false, true}, {"", 106, true, true}, {"b", 2, false, true}, {"partial", 7, false, false}} {
		l, err := lr.Next()
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if string(l.Data) != w.data || l.Size != w.size || l.TooLong != w.tooLong || l.Complete != w.complete {
			t.Fatalf("line %d = %+v (%q), want %+v", i, l, l.Data, w)
		}
		if l.TooLong && l.Data != nil {
			t.Fatal("too-long line kept its data")
		}
	}
	if _, err := lr.Next(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}
