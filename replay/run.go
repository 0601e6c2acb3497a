package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
)

// Stats is what a replay read and produced.
type Stats struct {
	Files      int
	Bytes      int64 // bytes of input read
	TotalBytes int64 // size of the input files
	Lines      int   // non-blank lines that parsed as records
	// Conversation counts user/assistant/system/summary records; Other
	// counts the rest by type (skipped without decoding, D14).
	Conversation int
	Other        map[string]int
	Duplicates   int
	Envelopes    map[protocol.Kind]int
	Turns        int
	Subagents    int
	Orphans      int // orphan sidechain records emitted without subagent (D11)
	// Skipped holds the first MaxSkipsKept lines that could not be used;
	// SkippedLines counts them all.
	Skipped      []Skip
	SkippedLines int
	Elapsed      time.Duration
	PeakRSS      int64 // bytes, 0 when unknown
}

// MaxSkipsKept bounds the unusable lines a replay lists one by one, so
// that its memory does not grow with them; the others are counted.
const MaxSkipsKept = 1000

// skip notes a line that could not be used.
func (s *Stats) skip(sk Skip) {
	s.SkippedLines++
	if len(s.Skipped) < MaxSkipsKept {
		s.Skipped = append(s.Skipped, sk)
	}
}

// skipped is the number of lines that could not be used.
func (s *Stats) skipped() int { return max(s.SkippedLines, len(s.Skipped)) }

// EnvelopeCount is the number of envelopes written.
func (s *Stats) EnvelopeCount() int {
	n := 0
	for _, v := range s.Envelopes {
		n += v
	}
	return n
}

// Options configure Run.
type Options struct {
	MaxLine int
	// Progress, if set, is called now and then with bytes read and total.
	Progress func(read, total int64)
	// End, if set, closes the turn still open after the last record with
	// this status, as local mode does when Claude exits: for a session
	// known to be over.
	End protocol.TurnStatus
}

// ErrNothingRead is returned (as a *NothingReadError) when no line of the
// input could be used.
var ErrNothingRead = errors.New("nothing could be read")

// NothingReadError says why nothing could be read: the input was empty, or
// none of its lines was a JSON record (it is not a transcript). It matches
// ErrNothingRead.
type NothingReadError struct {
	File    string // the main transcript
	Skipped int    // lines that were not records
	First   *Skip  // the first of them
}

func (e *NothingReadError) Error() string {
	if e.Skipped == 0 {
		return fmt.Sprintf("%s is empty: nothing to replay", e.File)
	}
	msg := fmt.Sprintf("%s is not a Claude Code transcript: none of its lines is a JSON record", e.File)
	if e.Skipped == 1 {
		msg = fmt.Sprintf("%s is not a Claude Code transcript: its only line is not a JSON record", e.File)
	}
	if f := e.First; f != nil && f.File == e.File {
		msg += fmt.Sprintf(" (line %d: %s)", f.Line, f.Reason)
	} else if f != nil {
		msg += fmt.Sprintf(" (%s)", f)
	}
	return msg
}

func (e *NothingReadError) Is(target error) bool { return target == ErrNothingRead }

// Run replays a session: every record, merged in timestamp order and
// deduplicated, goes through one mapper; each envelope goes to emit in
// order. The envelope is valid only during the call (emit copies what it
// keeps). It stops early if ctx is cancelled or emit fails.
func Run(ctx context.Context, s Session, opts Options, emit func(*protocol.Envelope) error) (*Stats, error) {
	began := time.Now()
	st := &Stats{Other: map[string]int{}, Envelopes: map[protocol.Kind]int{}, Files: len(s.Files())}
	defer func() {
		st.Elapsed = time.Since(began)
		st.PeakRSS = PeakRSS()
	}()
	if s.Codex {
		return runCodex(ctx, s, opts, st, emit)
	}
	for _, p := range s.Files() {
		if fi, err := os.Stat(p); err == nil {
			st.TotalBytes += fi.Size()
		}
	}
	mg, err := Open(s.Files(), opts.MaxLine, st.skip)
	if err != nil {
		return st, err
	}
	defer mg.Close()
	return st, run(ctx, s, mg, st, opts, emit)
}

// run maps the records mg merges, counting in st.
func run(ctx context.Context, s Session, mg *Merger, st *Stats, opts Options, emit func(*protocol.Envelope) error) error {
	mp := mapper.New(s.ID)
	var dd claude.Dedupe
	send := func(envs []protocol.Envelope) error {
		for i := range envs {
			st.Envelopes[envs[i].Ev.T]++
			if err := emit(&envs[i]); err != nil {
				return err
			}
		}
		return nil
	}
	var lastProgress int64
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		it, err := mg.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		st.Lines++
		r := it.Record
		if !claude.IsConversationType(r.Type) {
			name := r.Type
			if name == "" {
				name = "(no type)"
			}
			st.Other[name]++
			continue
		}
		st.Conversation++
		if dd.Seen(r) {
			st.Duplicates++
			continue
		}
		// Each envelope is written at once: the mapper's own do.
		if err := send(mp.MapShort(r)); err != nil {
			return err
		}
		if opts.Progress != nil && mg.Read-lastProgress > 1<<20 {
			lastProgress = mg.Read
			opts.Progress(mg.Read, st.TotalBytes)
		}
	}
	if opts.End != "" {
		if err := send(mp.Close(opts.End)); err != nil {
			return err
		}
	}
	st.Bytes = mg.Read
	ms := mp.Stats()
	st.Turns, st.Subagents, st.Orphans = ms.Turns, ms.Subagents, ms.OrphansFlushed+ms.OrphansOverflow
	if opts.Progress != nil {
		opts.Progress(mg.Read, st.TotalBytes)
	}
	if st.Lines == 0 {
		e := &NothingReadError{File: s.Main, Skipped: st.skipped()}
		if len(st.Skipped) > 0 {
			e.First = &st.Skipped[0]
		}
		return e
	}
	return nil
}

// WriteSummary writes a human summary of st. maxSkips bounds how many
// skipped lines are listed one by one (<= 0: all).
func WriteSummary(w io.Writer, st *Stats, maxSkips int) {
	fmt.Fprintf(w, "read %d records from %d file(s), %s: %d conversation, %d other",
		st.Lines, st.Files, size(st.Bytes), st.Conversation, st.Lines-st.Conversation)
	if st.Duplicates > 0 {
		fmt.Fprintf(w, ", %d duplicates dropped", st.Duplicates)
	}
	fmt.Fprintln(w)
	var kinds []string
	for _, k := range protocol.Kinds {
		if n := st.Envelopes[k]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
	}
	fmt.Fprintf(w, "wrote %d envelopes", st.EnvelopeCount())
	if len(kinds) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(kinds, ", "))
	}
	fmt.Fprintf(w, "; %s, %s\n", plural(st.Turns, "turn"), plural(st.Subagents, "subagent"))
	if secs := st.Elapsed.Seconds(); secs > 0 {
		fmt.Fprintf(w, "took %.2f s (%.1f MB/s)", secs, float64(st.Bytes)/1e6/secs)
		if st.PeakRSS > 0 {
			fmt.Fprintf(w, ", peak memory %.1f MB", float64(st.PeakRSS)/(1<<20))
		}
		fmt.Fprintln(w)
	}
	if st.Orphans > 0 {
		fmt.Fprintf(w, "%d subagent records never found their parent and were shown without it\n", st.Orphans)
	}
	if len(st.Other) > 0 {
		types := make([]string, 0, len(st.Other))
		for t := range st.Other {
			types = append(types, t)
		}
		sort.Slice(types, func(i, j int) bool {
			if st.Other[types[i]] != st.Other[types[j]] {
				return st.Other[types[i]] > st.Other[types[j]]
			}
			return types[i] < types[j]
		})
		parts := make([]string, len(types))
		for i, t := range types {
			parts[i] = fmt.Sprintf("%s %d", t, st.Other[t])
		}
		fmt.Fprintf(w, "not conversation (skipped): %s\n", strings.Join(parts, ", "))
	}
	if n := st.skipped(); n > 0 {
		fmt.Fprintf(w, "%d line(s) skipped:\n", n)
		for i, sk := range st.Skipped {
			if maxSkips > 0 && i == maxSkips {
				fmt.Fprintf(w, "  … and %d more (use --verbose to list all)\n", n-maxSkips)
				return
			}
			fmt.Fprintf(w, "  %s\n", sk)
		}
		if n > len(st.Skipped) {
			fmt.Fprintf(w, "  … and %d more (only the first %d are listed)\n", n-len(st.Skipped), len(st.Skipped))
		}
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
