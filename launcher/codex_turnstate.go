package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
)

// A ccrelay that stops in the middle of a Codex turn leaves it open in the
// app, and Codex writes no end of it. As for Claude (KeepTurns), the
// pipeline keeps each session's open turn in a file of the run's slot,
// with the ordinal of the last line of its root thread that was mapped;
// the next run, whose follower delivers the lines up to there again as
// replayed, ends that turn (failed, saying ccrelay stopped) once the
// mapper has read them, before anything new of the session.

// CodexTurnsFile is the name of the file, in a run's slot of the state
// folder, that keeps each Codex session's open turn.
const CodexTurnsFile = "codex-turns.json"

// CodexStoppedCut ends a Codex turn that an earlier ccrelay left open.
var CodexStoppedCut = mapper.Cut{Status: protocol.StatusFailed,
	Result: "ccrelay stopped while this tool ran (and Codex with it); the tool did not finish.",
	Note:   "ccrelay stopped before this turn ended (and Codex with it)."}

// CodexOpenTurn is a Codex session's open turn as kept, with the ordinal
// of the last line of its root thread mapped then.
type CodexOpenTurn struct {
	Turn    mapper.OpenTurn `json:"turn"`
	Ordinal int64           `json:"ordinal"`
}

// codexTurnMapper is what ending a turn an earlier run left open needs of
// a Codex mapper (mapper.Codex).
type codexTurnMapper interface {
	Open() mapper.OpenTurn
	Orphan(ot mapper.OpenTurn, c mapper.Cut) []protocol.Envelope
	Cut(c mapper.Cut) []protocol.Envelope
}

// ReadCodexTurns reads a Codex turns file; a missing one holds none.
func ReadCodexTurns(path string) (map[string]CodexOpenTurn, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read open Codex turns: %w", err)
	}
	var turns map[string]CodexOpenTurn
	if err := json.Unmarshal(b, &turns); err != nil {
		return nil, fmt.Errorf("read open Codex turns %s: %w", path, err)
	}
	for s, ot := range turns {
		if !ValidSessionID(s) || ot.Turn.Turn == "" || !protocol.IsCuid(ot.Turn.Turn) {
			delete(turns, s)
		}
	}
	return turns, nil
}

// KeepTurns has the pipeline keep each session's open turn in the file at
// path; the turns the file holds are ended once their session's lines up
// to where they were kept are mapped again, before any new line, or at
// Close.
func (p *CodexPipeline) KeepTurns(path string, log *slog.Logger) error {
	turns, err := ReadCodexTurns(path)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.turnsPath, p.turnsLog = path, log
	if p.turnsLog == nil {
		p.turnsLog = slog.Default()
	}
	p.saved, p.orphans = map[string]CodexOpenTurn{}, map[string]CodexOpenTurn{}
	for s, ot := range turns {
		p.orphans[s], p.saved[s] = ot, ot
	}
	return err
}

// adopt ends the turn an earlier run left open in session, if any. Called
// with mu held.
func (p *CodexPipeline) adopt(session string, m CodexMapper) []protocol.Envelope {
	ot, ok := p.orphans[session]
	if !ok {
		return nil
	}
	delete(p.orphans, session)
	tm, ok := m.(codexTurnMapper)
	if !ok {
		return nil
	}
	envs := tm.Orphan(ot.Turn, CodexStoppedCut)
	if tm.Open().Turn == ot.Turn.Turn {
		// Rebuilt from the rollout (or taken as it was kept): Codex will
		// not end it.
		envs = append(envs, tm.Cut(CodexStoppedCut)...)
	}
	return envs
}

// saveTurn keeps session's open turn after an append that stored its
// lines up to ordinal (-1: none of its root thread). Called with mu held.
func (p *CodexPipeline) saveTurn(session string, ordinal int64) {
	if p.turnsPath == "" {
		return
	}
	if _, waiting := p.orphans[session]; waiting {
		return // the kept turn stands until it is ended
	}
	tm, ok := p.mappers[session].(codexTurnMapper)
	if !ok {
		return
	}
	ot := CodexOpenTurn{Turn: tm.Open(), Ordinal: ordinal}
	old, had := p.saved[session]
	if ordinal < 0 {
		ot.Ordinal = old.Ordinal
	}
	switch {
	case ot.Turn.Turn == "" && !had:
		return
	case ot.Turn.Turn == "":
		delete(p.saved, session)
	case had && old.Ordinal == ot.Ordinal && old.Turn.Equal(ot.Turn):
		return
	default:
		p.saved[session] = ot
	}
	p.writeTurns()
}

// writeTurns writes the kept turns. Called with mu held.
func (p *CodexPipeline) writeTurns() {
	b, err := json.Marshal(p.saved)
	if err == nil {
		err = writeFileDurably(p.turnsPath, b)
	}
	if err != nil {
		p.turnsLog.Warn("could not keep the open Codex turns", "err", err)
	}
}
