package replay

import (
	"bytes"
	"io"
	"testing"
)

// Opening a file costs two allocations, the file's reader and its read
// buffer: the line reader and the parent order of the main transcript are
// part of the file's reader (sessions have many small subagent files, and
// for a file of a few lines these costs are most of its replay).
func TestFileReaderAllocs(t *testing.T) {
	in, data, nop := bytes.NewReader(nil), []byte("\n"), io.NopCloser(nil)
	var read int64
	allocs := testing.AllocsPerRun(100, func() {
		in.Reset(data)
		mg := Merger{files: []*fileReader{newFileReader("t.jsonl", in, nop, 1, DefaultMaxLine, &read, func(Skip) {})}}
		if err := mg.start(); err != nil {
			t.Fatal(err)
		}
		if _, err := mg.Next(); err != io.EOF {
			t.Fatalf("Next: %v, want io.EOF", err)
		}
	})
	if allocs > 2 {
		t.Fatalf("%v allocations to open and read an empty file, want 2", allocs)
	}
}
