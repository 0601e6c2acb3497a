package scanner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type collected struct {
	lines []string
	nums  []int
}

func (c *collected) fn(l Line) error {
	if l.TooLong {
		c.lines = append(c.lines, "<too long>")
	} else {
		c.lines = append(c.lines, string(l.Data))
	}
	c.nums = append(c.nums, l.Num)
	return nil
}

func appendTo(t testing.TB, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestTailIncremental(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.jsonl")
	tail := NewTail(p, Position{})
	if _, err := tail.ReadNew(func(Line) error { return nil }); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	appendTo(t, p, "one\ntwo\nthr")
	var c collected
	if _, err := tail.ReadNew(c.fn); err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.lines, ",") != "one,two" || tail.Position().Offset != 8 {
		t.Fatalf("got %v at %+v", c.lines, tail.Position())
	}
	// The partial line waits; nothing new is read twice.
	if _, err := tail.ReadNew(c.fn); err != nil || len(c.lines) != 2 {
		t.Fatalf("re-read: %v %v", c.lines, err)
	}
	appendTo(t, p, "ee\r\nfour\n")
	if _, err := tail.ReadNew(c.fn); err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.lines, ",") != "one,two,three,four" || c.nums[3] != 4 {
		t.Fatalf("got %v %v", c.lines, c.nums)
	}
	// Resuming from a saved position reads only what follows.
	appendTo(t, p, "five\n")
	var r collected
	resumed := NewTail(p, Position{Offset: tail.Position().Offset, Line: 4, ID: tail.Position().ID})
	if reset, err := resumed.ReadNew(r.fn); err != nil || reset || strings.Join(r.lines, ",") != "five" || r.nums[0] != 5 {
		t.Fatalf("resume: %v %v reset=%v", r.lines, err, reset)
	}
}

func TestTailResetOnShrinkAndReplace(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.jsonl")
	appendTo(t, p, "a\nb\n")
	tail := NewTail(p, Position{})
	var c collected
	tail.ReadNew(c.fn)
	// Truncated and rewritten shorter.
	if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reset, err := tail.ReadNew(c.fn)
	if err != nil || !reset || strings.Join(c.lines, ",") != "a,b,x" {
		t.Fatalf("shrink: %v reset=%v %v", c.lines, reset, err)
	}
	// Replaced by another file (new inode) of greater size.
	tmp := filepath.Join(dir, "new")
	os.WriteFile(tmp, []byte("p\nq\nr\n"), 0o644)
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	reset, err = tail.ReadNew(c.fn)
	if err != nil || !reset || strings.Join(c.lines, ",") != "a,b,x,p,q,r" || c.nums[5] != 3 {
		t.Fatalf("replace: %v %v reset=%v %v", c.lines, c.nums, reset, err)
	}
}

func TestTailLongLineAndCallbackError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.jsonl")
	appendTo(t, p, "ok\n"+strings.Repeat("x", 300<<10)+"\nafter\n")
	tail := NewTail(p, Position{})
	tail.MaxLine = 100 << 10
	var c collected
	if _, err := tail.ReadNew(c.fn); err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.lines, ",") != "ok,<too long>,after" {
		t.Fatalf("got %v", c.lines)
	}
	// A failing consumer leaves the position before the failed line.
	appendTo(t, p, "next\n")
	before := tail.Position()
	boom := errors.New("boom")
	if _, err := tail.ReadNew(func(Line) error { return boom }); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if !tail.Position().Equal(before) {
		t.Fatalf("position moved to %+v", tail.Position())
	}
	var again collected
	tail.ReadNew(again.fn)
	if strings.Join(again.lines, ",") != "next" {
		t.Fatalf("got %v", again.lines)
	}
}

// A file rewritten in place to the same size is noticed by the bytes before
// the position, and read again.
func TestTailRewriteSameSize(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.jsonl")
	appendTo(t, p, "aaaa\nbbbb\n")
	tail := NewTail(p, Position{})
	var c collected
	tail.ReadNew(c.fn)
	saved := tail.Position()
	if err := os.WriteFile(p, []byte("cccc\ndddd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reset, err := tail.ReadNew(c.fn)
	if err != nil || !reset || strings.Join(c.lines, ",") != "aaaa,bbbb,cccc,dddd" {
		t.Fatalf("got %v reset=%v err=%v", c.lines, reset, err)
	}
	// The guard is part of the saved position: a restart notices it too.
	restarted := NewTail(p, saved)
	var r collected
	if reset, _ := restarted.ReadNew(r.fn); !reset || len(r.lines) != 2 {
		t.Fatalf("after restart: %v reset=%v", r.lines, reset)
	}
}
