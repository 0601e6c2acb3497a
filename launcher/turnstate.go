package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
)

// A ccrelay that stops (killed, or its machine went down) stops its Claude
// too: the turn the app sees open then never ends by itself, and what
// stream-json printed of it may never reach the transcript, so the next
// ccrelay cannot rebuild it from there. The pipeline keeps each session's
// open turn in a file beside the scanner's cursor (KeepTurns), written after
// every append that changes it; the next run reads it and ends that turn
// (failed, saying ccrelay stopped) before anything else of the session goes
// out, so that the next turn never opens beside it.

// TurnsFile is the name of the file, in a run's slot of the state folder,
// that keeps each session's open turn.
const TurnsFile = "turns.json"

// StoppedCut ends a turn that an earlier ccrelay left open.
var StoppedCut = mapper.Cut{Status: protocol.StatusFailed,
	Result: "ccrelay stopped while this tool ran (and Claude Code with it); the tool did not finish.",
	Note:   "ccrelay stopped before this turn ended (and Claude Code with it)."}

// ReadTurns reads a turns file (KeepTurns): the open turn of each session.
// A missing file holds none; an entry that names no session id or turn is
// dropped.
func ReadTurns(path string) (map[string]mapper.OpenTurn, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read open turns: %w", err)
	}
	var turns map[string]mapper.OpenTurn
	if err := json.Unmarshal(b, &turns); err != nil {
		return nil, fmt.Errorf("read open turns %s: %w", path, err)
	}
	for s, ot := range turns {
		if !ValidSessionID(s) || ot.Turn == "" || !protocol.IsCuid(ot.Turn) {
			delete(turns, s)
		}
	}
	return turns, nil
}

// KeepTurns has the pipeline keep the open turn of each session in the
// file at path. The turns the file holds (an earlier run left them open)
// are ended before anything else of their session: at its first record,
// prompt, note or close, or at Close.
func (p *Pipeline) KeepTurns(path string, log *slog.Logger) error {
	turns, err := ReadTurns(path)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.turnsPath, p.turnsLog = path, log
	if p.turnsLog == nil {
		p.turnsLog = slog.Default()
	}
	p.saved = map[string]mapper.OpenTurn{}
	for s, ot := range turns {
		p.orphans[s], p.saved[s] = ot, ot
	}
	return err
}

// AddOrphans adds turns another run left open (its slot's file, taken
// over): they are ended as KeepTurns' are, and kept in this run's file
// until then (the slot they came from is gone).
func (p *Pipeline) AddOrphans(turns map[string]mapper.OpenTurn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	added := false
	for s, ot := range turns {
		if _, ok := p.orphans[s]; !ok && ot.Turn != "" {
			p.orphans[s] = ot
			added = true
			if p.saved != nil {
				p.saved[s] = ot
			}
		}
	}
	if added && p.turnsPath != "" {
		if err := writeTurns(p.turnsPath, p.saved); err != nil {
			p.turnsLog.Warn("could not keep the open turns", "err", err)
		}
	}
}

// adopt returns the end of the turn an earlier run left open in session,
// which goes out before anything else of it. Called with mu held.
func (p *Pipeline) adopt(session string, m *mapper.Mapper) []protocol.Envelope {
	ot, ok := p.orphans[session]
	if !ok {
		return nil
	}
	delete(p.orphans, session)
	return m.Orphan(ot, StoppedCut)
}

// adoptBefore is adopt before rec, a record the scanner delivers that
// is not replayed: the turn an earlier run left open waits while rec may
// be one whose envelopes that run appended (written no later than the
// turn's time) and the mapper has not rebuilt that turn yet
// (mapper.Rebuilt). Called with mu held.
func (p *Pipeline) adoptBefore(session string, m *mapper.Mapper, rec *claude.Record) []protocol.Envelope {
	ot, ok := p.orphans[session]
	if !ok {
		return nil
	}
	if ot.Time > 0 && rec.Timestamp > 0 && rec.Timestamp <= ot.Time && !m.Rebuilt(ot) {
		return nil
	}
	return p.adopt(session, m)
}

// saveTurn writes the session's open turn to the turns file when it
// changed. Called with mu held, after an append.
func (p *Pipeline) saveTurn(session string) {
	m := p.mappers[session]
	if p.turnsPath == "" || m == nil {
		return
	}
	if _, waiting := p.orphans[session]; waiting {
		return // the mapper rebuilds what the app has: the kept turn stands
	}
	ot := m.Open()
	if ot.Equal(p.saved[session]) {
		return
	}
	if ot.Turn == "" {
		delete(p.saved, session)
	} else {
		p.saved[session] = ot
	}
	if err := writeTurns(p.turnsPath, p.saved); err != nil {
		p.turnsLog.Warn("could not keep the open turns", "err", err)
	}
}

// writeTurns replaces the turns file with turns, durably.
func writeTurns(path string, turns map[string]mapper.OpenTurn) error {
	b, err := json.Marshal(maps.Clone(turns))
	if err != nil {
		return fmt.Errorf("encode open turns: %w", err)
	}
	return writeFileDurably(path, b)
}

// writeFileDurably replaces the file at path with b: written beside it,
// synced, then renamed over it.
func writeFileDurably(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".turns-*")
	if err != nil {
		return fmt.Errorf("write open turns: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write open turns: %w", err)
	}
	return nil
}
