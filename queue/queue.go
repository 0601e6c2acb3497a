// Package queue is the ordered outgoing queue of remote mode: items leave in
// the order they were pushed; an item may be held back for a while (a
// top-level tool call waiting to see whether a permission request or its
// result follows) and everything behind it waits with it, until the delay
// ends, the item is released early by its key, or the queue is flushed.
// The queue does not know what it carries.
package queue

import (
	"sync"
	"time"
)

// Clock makes timers; tests use a fake one.
type Clock interface {
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a stoppable timer.
type Timer interface{ Stop() bool }

type realClock struct{}

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// RealClock uses the time package.
var RealClock Clock = realClock{}

type entry[T any] struct {
	v     T
	key   string
	held  bool
	timer Timer
}

// Queue delivers items in push order. Deliver is called with the longest
// ready prefix, never concurrently with itself, and never out of order.
type Queue[T any] struct {
	mu      sync.Mutex
	items   []*entry[T]
	deliver func([]T)
	clock   Clock
	closed  bool
}

// New returns a queue that hands ready items to deliver. A nil clock is
// the real one.
func New[T any](deliver func([]T), clock Clock) *Queue[T] {
	if clock == nil {
		clock = RealClock
	}
	return &Queue[T]{deliver: deliver, clock: clock}
}

// Push appends v; it leaves at once unless something before it is held.
func (q *Queue[T]) Push(v T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.items = append(q.items, &entry[T]{v: v})
	q.drain()
}

// PushHeld appends v held for at most d; Release(key) lets it go earlier.
// Items pushed after it wait behind it.
func (q *Queue[T]) PushHeld(v T, key string, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := &entry[T]{v: v, key: key, held: !q.closed}
	q.items = append(q.items, e)
	if q.closed {
		q.drain()
	} else {
		e.timer = q.clock.AfterFunc(d, func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			e.held = false
			q.drain()
		})
	}
}

// Release lets every held item with key go now. It reports whether one was
// held.
func (q *Queue[T]) Release(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	found := false
	for _, e := range q.items {
		if e.held && e.key == key {
			q.unhold(e)
			found = true
		}
	}
	q.drain()
	return found
}

// Flush releases everything and delivers it, in order.
func (q *Queue[T]) Flush() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range q.items {
		q.unhold(e)
	}
	q.drain()
}

// Close flushes and stops the timers; later pushes are delivered at once.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, e := range q.items {
		q.unhold(e)
	}
	q.drain()
}

func (q *Queue[T]) unhold(e *entry[T]) {
	e.held = false
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
}

// drain delivers the ready prefix. Called with mu held: deliveries are
// serialised and ordered.
func (q *Queue[T]) drain() {
	n := 0
	for n < len(q.items) && !q.items[n].held {
		n++
	}
	if n == 0 {
		return
	}
	out := make([]T, n)
	for i := range n {
		out[i] = q.items[i].v
		q.items[i] = nil
	}
	q.items = q.items[n:]
	q.deliver(out)
}
