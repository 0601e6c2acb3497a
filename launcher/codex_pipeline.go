package launcher

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

// CodexMapper maps the rollout records of one Codex thread into envelopes
// (mapper.Codex).
type CodexMapper interface {
	Map(r *codex.Record) []protocol.Envelope
	Close(status protocol.TurnStatus) []protocol.Envelope
}

// CodexThreadMapper also maps the records of a subagent's thread into the
// session (mapper.Codex.MapThread).
type CodexThreadMapper interface {
	MapThread(thread string, r *codex.Record) []protocol.Envelope
}

// CodexPipeline maps the rollout lines a scanner.CodexFollower delivers
// into envelopes and puts them in the outbox: it is the follower's sink,
// whose cursor moves only once Append succeeded. Each root thread has its
// own mapper and is its own relay session (the thread id is the session
// id); a subagent's thread (a batch with Parent) is mapped into its root's
// session by the root's mapper, as replay maps it, so live ids and
// envelopes equal those of `ccrelay replay` of the rollout.
type CodexPipeline struct {
	mu        sync.Mutex
	newMapper func(thread string) CodexMapper
	mappers   map[string]CodexMapper
	order     []string
	outbox    Outbox
	// unsent holds a thread's envelopes whose append failed: the follower
	// delivers the same batch again (Retry), which must not be mapped
	// twice.
	unsent map[string][]protocol.Envelope
	// failed marks the threads whose last batch was mapped but not
	// stored (its envelopes are in unsent, or were stored since with
	// another thread's of the same session).
	failed  map[string]bool
	models  map[string]string
	onModel func(thread, model string)
	// turnsPath is where each session's open turn is kept (KeepTurns);
	// orphans are the turns an earlier run left open, not ended yet.
	turnsPath string
	turnsLog  *slog.Logger
	saved     map[string]CodexOpenTurn
	orphans   map[string]CodexOpenTurn
}

// NewCodexPipeline returns a pipeline writing to out, with a mapper per
// thread from newMapper.
func NewCodexPipeline(out Outbox, newMapper func(thread string) CodexMapper) *CodexPipeline {
	return &CodexPipeline{newMapper: newMapper, mappers: map[string]CodexMapper{}, outbox: out,
		unsent: map[string][]protocol.Envelope{}, failed: map[string]bool{}, models: map[string]string{}}
}

// OnModel sets what is called, outside the pipeline's lock, when a
// thread's model is first known or changes (its turn_context records);
// set it before delivering.
func (p *CodexPipeline) OnModel(f func(thread, model string)) { p.onModel = f }

// Model is the thread's model as its latest turn_context names it.
func (p *CodexPipeline) Model(thread string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.models[thread]
}

func (p *CodexPipeline) mapperFor(thread string) CodexMapper {
	m := p.mappers[thread]
	if m == nil {
		m = p.newMapper(thread)
		p.mappers[thread] = m
		p.order = append(p.order, thread)
	}
	return m
}

// DeliverCodex implements scanner.CodexSink. Lines marked Replayed rebuild
// the mapper's state; their envelopes were stored before a restart and are
// not appended again.
func (p *CodexPipeline) DeliverCodex(ctx context.Context, b scanner.CodexBatch) error {
	session := b.Thread
	if b.Parent != "" {
		session = b.Parent
	}
	p.mu.Lock()
	if b.Retry && p.failed[b.Thread] {
		// Mapped already: store what is left of it.
		err := p.appendTo(ctx, session, nil)
		if err == nil {
			delete(p.failed, b.Thread)
		}
		p.mu.Unlock()
		return err
	}
	m := p.mapperFor(session)
	var envs []protocol.Envelope
	model := p.models[session]
	sub, _ := m.(CodexThreadMapper)
	last := int64(-1) // the last line of the root thread mapped
	for _, l := range b.Lines {
		if !l.Replayed {
			envs = append(envs, p.adopt(session, m)...)
		}
		var out []protocol.Envelope
		switch {
		case b.Parent == "":
			out = m.Map(l.Record)
			last = l.Ordinal
			if tc := l.TurnContext; tc != nil && tc.Model != "" {
				model = tc.Model
			}
		case sub != nil:
			out = sub.MapThread(b.Thread, l.Record)
		}
		if !l.Replayed {
			envs = append(envs, out...)
		}
		if ot, ok := p.orphans[session]; ok && b.Parent == "" && l.Ordinal >= ot.Ordinal {
			// What the app was sent of the session is mapped again: the
			// turn the earlier run left open ends now.
			envs = append(envs, p.adopt(session, m)...)
		}
	}
	changed := model != p.models[session]
	p.models[session] = model
	err := p.appendTo(ctx, session, envs)
	if err != nil {
		p.failed[b.Thread] = true
	} else {
		delete(p.failed, b.Thread)
		p.saveTurn(session, last)
	}
	onModel := p.onModel
	p.mu.Unlock()
	if changed && onModel != nil {
		onModel(session, model)
	}
	return err
}

// appendTo appends envs of thread after what an earlier failed append
// left; on failure it keeps them all for the next try. Called with mu held.
func (p *CodexPipeline) appendTo(ctx context.Context, thread string, envs []protocol.Envelope) error {
	if held := p.unsent[thread]; len(held) > 0 {
		envs = append(slices.Clip(held), envs...)
	}
	if len(envs) == 0 {
		return nil
	}
	if err := p.outbox.Append(ctx, thread, envs); err != nil {
		p.unsent[thread] = envs
		return err
	}
	delete(p.unsent, thread)
	return nil
}

// Close ends the turn each thread has open with status (Codex exited in
// the middle of it) and appends what is left.
func (p *CodexPipeline) Close(ctx context.Context, status protocol.TurnStatus) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first error
	for _, session := range slices.Sorted(maps.Keys(p.orphans)) {
		// Nothing of it came again in this run: it ends as it was kept.
		m := p.mapperFor(session)
		if err := p.appendTo(ctx, session, p.adopt(session, m)); err != nil && first == nil {
			first = err
		}
	}
	for _, thread := range p.order {
		if err := p.appendTo(ctx, thread, p.mappers[thread].Close(status)); err != nil && first == nil {
			first = err
		}
	}
	if first == nil && p.turnsPath != "" && len(p.saved) > 0 {
		clear(p.saved)
		p.writeTurns()
	}
	return first
}

// Threads lists the threads mapped so far, in the order they came.
func (p *CodexPipeline) Threads() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.order)
}
