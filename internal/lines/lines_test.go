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

// A line that lies whole in the read buffer is returned from it, not
// copied: reading lines that fit the buffer allocates only the reader and
// its buffer, whatever their number and length. A line longer than the
// buffer is still put together from its pieces.
func TestReaderLinesInBuffer(t *testing.T) {
	var sb strings.Builder
	for i := range 200 {
		sb.WriteString(strings.Repeat(string(rune('a'+i%26)), 10+i*5))
		sb.WriteByte('\n')
	}
	in := sb.String()
	allocs := testing.AllocsPerRun(20, func() {
		lr := NewReader(strings.NewReader(in), len(in)+1, 1<<20)
		for {
			if _, err := lr.Next(); err != nil {
				break
			}
		}
	})
	// The strings.Reader, the Reader, its bufio.Reader and its buffer.
	if allocs > 4 {
		t.Fatalf("%.0f allocations to read 200 lines that fit the buffer, want at most 4", allocs)
	}

	// Lines that fit, then one longer than the buffer, then more that fit.
	long := strings.Repeat("y", 50)
	lr := NewReader(strings.NewReader("ab\ncd\r\n"+long+"\nef\ng"), 16, 100)
	for i, want := range []struct {
		data     string
		size     int64
		complete bool
	}{{"ab", 3, true}, {"cd", 4, true}, {long, 51, true}, {"ef", 3, true}, {"g", 1, false}} {
		l, err := lr.Next()
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if string(l.Data) != want.data || l.Size != want.size || l.Complete != want.complete || l.TooLong {
			t.Fatalf("line %d = %+v (%q), want %+v", i, l, l.Data, want)
		}
	}
	if _, err := lr.Next(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}
