package launcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// MaxPromptRetakes bounds how many times a prompt is given to a Claude
// started again after the one it was written to ended without taking it.
const MaxPromptRetakes = 2

// retakes are the prompts a Claude ended without taking, written again to
// the next Claude, in the order they were first written.
type retakes struct {
	once  sync.Once
	first int // the number of the first prompt not taken
	waits []func(context.Context) error
	errs  []error
}

// retake gives prompt n, which p ended without taking (no echo, not in its
// transcript: provably never taken, so never run twice), to the next
// Claude, started for it as any prompt starts one: a person on the phone
// expects what they sent to be answered, whatever became of the Claude it
// was written to. All the prompts p left go again together, in their
// order, once p's end is handled. A Claude stopped on purpose, a session
// closed, or no retake left fails the prompt with why.
func (r *Remote) retake(ctx context.Context, p *process, n, left int) error {
	stopped := fmt.Errorf("Claude Code stopped before taking the prompt: %s", p.reason())
	if left <= 0 || p.stopping.Load() {
		return stopped
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.again.once.Do(func() {
		texts, _ := p.notEchoed()
		p.emu.Lock()
		p.again.first = p.written - len(texts) + 1
		p.emu.Unlock()
		for _, text := range texts {
			wait, err := r.sendPrompt(text, left-1)
			p.again.waits = append(p.again.waits, wait)
			p.again.errs = append(p.again.errs, err)
		}
		if len(texts) > 0 {
			r.log.Info("remote: prompts the stopped Claude never took go to the next one", "session", r.ID(), "prompts", len(texts))
		}
	})
	i := n - p.again.first
	if i < 0 || i >= len(p.again.waits) {
		return stopped
	}
	if err := p.again.errs[i]; err != nil {
		if errors.Is(err, ErrClosed) {
			return stopped
		}
		return fmt.Errorf("%w; Claude Code could not take it again: %w", stopped, err)
	}
	return p.again.waits[i](ctx)
}

// retakeUnwritten gives a prompt that could not be written to p, which was
// ending, to the next Claude once p's end is handled.
func (r *Remote) retakeUnwritten(ctx context.Context, p *process, text string, left int) error {
	select {
	case <-p.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	stopped := fmt.Errorf("Claude Code stopped before taking the prompt: %s", p.reason())
	if p.stopping.Load() {
		return stopped
	}
	wait, err := r.sendPrompt(text, left-1)
	if err != nil {
		if errors.Is(err, ErrClosed) {
			return stopped
		}
		return fmt.Errorf("%w; Claude Code could not take it again: %w", stopped, err)
	}
	return wait(ctx)
}
