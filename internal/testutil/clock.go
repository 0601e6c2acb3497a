package testutil

import (
	"sync"
	"time"

	"github.com/ccrelay/ccrelay/queue"
)

// FakeClock is a queue.Clock whose timers fire only when it is advanced.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Duration
	timers []*fakeTimer
}

type fakeTimer struct {
	c    *FakeClock
	at   time.Duration
	f    func()
	done bool
}

// AfterFunc implements queue.Clock.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) queue.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now + d, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}

// Advance moves the clock on and runs the timers that are due, outside the
// clock's lock.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now += d
	var due []*fakeTimer
	for _, t := range c.timers {
		if !t.done && t.at <= c.now {
			t.done = true
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}
