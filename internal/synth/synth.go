// Package synth builds large synthetic transcripts from real ones, for
// benchmarks and memory checks: it repeats the records of a source session
// with fresh uuids and message ids, so that every copy survives dedupe and
// maps to new envelopes.
package synth

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
)

// uuidRe matches the uuids and API message ids a transcript uses as keys.
var uuidRe = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|msg_[0-9A-Za-z]+`)

// Source is the lines of one transcript, with where each id ends.
type Source []line

type line struct {
	text []byte
	ends []int // offsets just past each uuid or message id
}

// Load reads a transcript file into memory.
func Load(path string) (Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	defer f.Close()
	var s Source
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		raw, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(raw)) > 0 {
			text := bytes.TrimRight(raw, "\n")
			var ends []int
			for _, m := range uuidRe.FindAllIndex(text, -1) {
				ends = append(ends, m[1])
			}
			s = append(s, line{text: text, ends: ends})
		}
		if err == io.EOF {
			return s, nil
		}
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", path, err)
		}
	}
}

// Write writes copies of the sources, in turn, to w until at least target
// bytes are written. Copy k rewrites every uuid and message id X to X plus a
// suffix unique to k. It returns the bytes written.
func Write(w io.Writer, target int64, sources ...Source) (int64, error) {
	if len(sources) == 0 {
		return 0, fmt.Errorf("synth: no source")
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var n int64
	for k := 0; n < target; k++ {
		suffix := []byte("-" + strconv.Itoa(k))
		for _, l := range sources[k%len(sources)] {
			prev := 0
			for _, end := range l.ends {
				bw.Write(l.text[prev:end])
				bw.Write(suffix)
				n += int64(end-prev) + int64(len(suffix))
				prev = end
			}
			bw.Write(l.text[prev:])
			n += int64(len(l.text)-prev) + 1
			if err := bw.WriteByte('\n'); err != nil {
				return n, err
			}
		}
	}
	return n, bw.Flush()
}
