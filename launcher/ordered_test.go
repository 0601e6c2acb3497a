package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// orderRun is RunLoop in remote mode (headless) over the fake Claude, which
// logs every prompt and setting it reads on stdin.
type orderRun struct {
	t     *testing.T
	cmds  chan Command
	ev    *events
	inlog string
	stop  func()
}

func startOrderRun(t *testing.T) *orderRun {
	t.Helper()
	home, project := t.TempDir(), t.TempDir()
	inlog := filepath.Join(t.TempDir(), "in")
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_INLOG=" + inlog}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	run := &orderRun{t: t, cmds: make(chan Command), ev: &events{}, inlog: inlog}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := RunLoop(ctx, LoopOptions{
			Local:       LocalOptions{Claude: fakeClaude, Dir: project, Env: env, Logger: log},
			Remote:      RemoteOptions{StopTimeout: time.Second},
			Pipeline:    NewPipeline("", &MemOutbox{}),
			Commands:    run.cmds,
			Events:      run.ev,
			StartRemote: true,
			Session:     "77777777-2222-4333-8444-555555555555",
			Logger:      log,
		})
		done <- err
	}()
	run.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunLoop: %v", err)
		}
	}
	return run
}

// send hands the commands to the loop one after another, as the relay
// delivers them in a burst, and returns their replies (nil: done).
func (r *orderRun) send(cmds ...protocol.Command) []error {
	r.t.Helper()
	replies := make([]chan error, len(cmds))
	for i, c := range cmds {
		c.ID = protocol.New()
		ch := make(chan error, 1)
		replies[i] = ch
		r.cmds <- Command{Command: c, Reply: func(err error) { ch <- err }}
	}
	errs := make([]error, len(cmds))
	timeout := time.After(30 * time.Second)
	for i, ch := range replies {
		select {
		case errs[i] = <-ch:
		case <-timeout:
			r.t.Fatalf("no reply to command %d (%s)", i, cmds[i].Kind)
		}
	}
	return errs
}

// received is what the fake Claude read on stdin, in order.
func (r *orderRun) received() []string {
	r.t.Helper()
	b, err := os.ReadFile(r.inlog)
	if err != nil {
		r.t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// Prompts sent one after another reach Claude in that order, every time:
// 50 in a burst (as the relay delivers the prompts queued while no CLI was
// connected) and two back to back.
func TestLoopPromptsReachClaudeInOrder(t *testing.T) {
	for _, tc := range []struct {
		name          string
		prompts, runs int
	}{
		{"two back to back", 2, 100},
		{"fifty queued", 50, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cmds []protocol.Command
			var want []string
			for i := range tc.prompts {
				cmds = append(cmds, protocol.Command{Kind: protocol.CommandPrompt, Text: fmt.Sprint("p", i)})
				want = append(want, fmt.Sprint("prompt p", i))
			}
			inOrder := 0
			for run := range tc.runs {
				r := startOrderRun(t)
				for i, err := range r.send(cmds...) {
					if err != nil {
						t.Fatalf("run %d: prompt %d rejected: %v", run, i, err)
					}
				}
				r.stop()
				if got := r.received(); slices.Equal(got, want) {
					inOrder++
				} else if inOrder == run { // report the first disorder
					t.Errorf("run %d: Claude got %v", run, got)
				}
			}
			if inOrder != tc.runs {
				t.Fatalf("in order %d of %d runs", inOrder, tc.runs)
			}
		})
	}
}

// Model and permission-mode changes interleaved with prompts reach Claude
// in the order sent, and the session's state ends with the last value
// sent, which is the one Claude has.
func TestLoopSettingsEndInLastValueSent(t *testing.T) {
	for run := range 20 {
		r := startOrderRun(t)
		models := []string{"opus", "sonnet", "haiku", "opus", "sonnet"}
		modes := []string{"plan", "acceptEdits", "default", "plan", "acceptEdits"}
		cmds := []protocol.Command{{Kind: protocol.CommandPrompt, Text: "first"}}
		var want []string
		want = append(want, "prompt first")
		for i := range models {
			cmds = append(cmds,
				protocol.Command{Kind: protocol.CommandModel, Model: models[i]},
				protocol.Command{Kind: protocol.CommandPermissionMode, Mode: modes[i]},
				protocol.Command{Kind: protocol.CommandPrompt, Text: fmt.Sprint("p", i)})
			want = append(want, "model "+models[i], "mode "+modes[i], fmt.Sprint("prompt p", i))
		}
		for i, err := range r.send(cmds...) {
			if err != nil {
				t.Fatalf("run %d: command %d (%s) rejected: %v", run, i, cmds[i].Kind, err)
			}
		}
		st := r.ev.last()
		r.stop()
		if got := r.received(); !slices.Equal(got, want) {
			t.Fatalf("run %d: Claude got %v, want %v", run, got, want)
		}
		if st.Model != "sonnet" || st.PermissionMode != "acceptEdits" {
			t.Fatalf("run %d: the app is shown model %q, mode %q; Claude has sonnet, acceptEdits", run, st.Model, st.PermissionMode)
		}
	}
}

// blockedRemote takes the first prompt and then blocks writing, as a Claude
// that reads nothing would.
type blockedRemote struct {
	writing chan struct{}
	release chan struct{}
}

func (b *blockedRemote) SendPrompt(string) (func(context.Context) error, error) {
	select {
	case b.writing <- struct{}{}:
	default:
	}
	<-b.release
	return func(context.Context) error { return nil }, nil
}
func (b *blockedRemote) SendModel(string) (func(context.Context) error, error) {
	return b.SendPrompt("")
}
func (b *blockedRemote) SendPermissionMode(string) (func(context.Context) error, error) {
	return b.SendPrompt("")
}

// At most MaxOrderedCommands wait behind a write Claude does not take; one
// more is rejected at once, and stopping rejects those not written.
func TestOrderedQueueBounded(t *testing.T) {
	b := &blockedRemote{writing: make(chan struct{}, 1), release: make(chan struct{})}
	w := newOrdered(context.Background(), b)
	replies := make(chan error, MaxOrderedCommands+2)
	cmd := Command{Command: protocol.Command{Kind: protocol.CommandPrompt}, Reply: func(err error) { replies <- err }}
	w.push(cmd)
	<-b.writing // the first is being written; the queue is empty
	for range MaxOrderedCommands {
		w.push(cmd)
	}
	select {
	case err := <-replies:
		t.Fatalf("a command within the bound was answered: %v", err)
	default:
	}
	w.push(cmd)
	if err := <-replies; err != errTooManyOrdered {
		t.Fatalf("command %d: %v, want %v", MaxOrderedCommands+2, err, errTooManyOrdered)
	}
	close(b.release)
	w.stop()
	w.waits.Wait()
	n := 0
	for len(replies) > 0 {
		<-replies
		n++
	}
	// Each pushed command got one reply: written (nil) or not (ErrClosed).
	if n != MaxOrderedCommands+1 {
		t.Fatalf("%d replies after stop, want %d", n, MaxOrderedCommands+1)
	}
}

// untakenRemote writes every prompt at once; Claude takes them only when
// the test says (take), never on a timer, until it ends (ended closed).
type untakenRemote struct {
	mu      sync.Mutex
	written int
	take    chan struct{} // one send takes the oldest prompt not taken
	ended   chan struct{}
}

func (u *untakenRemote) SendPrompt(string) (func(context.Context) error, error) {
	u.mu.Lock()
	u.written++
	u.mu.Unlock()
	return func(ctx context.Context) error {
		select {
		case <-u.take:
			return nil
		case <-u.ended:
			return errors.New("Claude Code stopped before taking the prompt")
		case <-ctx.Done():
			return ctx.Err()
		}
	}, nil
}
func (u *untakenRemote) SendModel(string) (func(context.Context) error, error) {
	return func(context.Context) error { return nil }, nil
}
func (u *untakenRemote) SendPermissionMode(string) (func(context.Context) error, error) {
	return u.SendModel("")
}
func (u *untakenRemote) count() int { u.mu.Lock(); defer u.mu.Unlock(); return u.written }

// At most MaxUntakenPrompts prompts are written and not taken: the next
// waits in the queue until Claude takes one. A prompt not taken is never
// answered on a timer (a long turn before it is no failure); it ends with
// the session.
func TestOrderedUntakenPromptsBounded(t *testing.T) {
	u := &untakenRemote{take: make(chan struct{}), ended: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	w := newOrdered(ctx, u)
	replies := make(chan error, MaxUntakenPrompts+2)
	cmd := Command{Command: protocol.Command{Kind: protocol.CommandPrompt}, Reply: func(err error) { replies <- err }}
	for range MaxUntakenPrompts + 1 {
		w.push(cmd)
	}
	deadline := time.Now().Add(10 * time.Second)
	for u.count() < MaxUntakenPrompts && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := u.count(); n != MaxUntakenPrompts {
		t.Fatalf("%d prompts written, want %d", n, MaxUntakenPrompts)
	}
	select {
	case err := <-replies:
		t.Fatalf("a prompt was answered before Claude took any: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if n := u.count(); n != MaxUntakenPrompts {
		t.Fatalf("%d prompts written while %d were not taken", n, MaxUntakenPrompts)
	}
	u.take <- struct{}{} // Claude takes one: it is done, and the next is written
	if err := <-replies; err != nil {
		t.Fatalf("taken prompt: %v", err)
	}
	for u.count() < MaxUntakenPrompts+1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := u.count(); n != MaxUntakenPrompts+1 {
		t.Fatalf("%d prompts written after one was taken, want %d", n, MaxUntakenPrompts+1)
	}
	// The session ends (its Claude with it, as the loop stops it): the
	// prompts not taken are answered with why.
	cancel()
	w.stop()
	close(u.ended)
	w.waits.Wait()
	n := 0
	for len(replies) > 0 {
		if err := <-replies; err == nil {
			t.Fatal("a prompt Claude never took was answered done")
		}
		n++
	}
	if n != MaxUntakenPrompts {
		t.Fatalf("%d answers at the end, want %d", n, MaxUntakenPrompts)
	}
}
