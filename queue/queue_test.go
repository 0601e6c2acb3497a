package queue_test

import (
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/queue"
	"slices"
	"sync"
	"testing"
	"time"
)

type recorder struct {
	mu    sync.Mutex
	got   []string
	calls int
}

func (r *recorder) deliver(v []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, v...)
	r.calls++
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func TestQueue(t *testing.T) {
	type op struct {
		do   string // push, hold, release, flush, advance, close
		v    string
		d    time.Duration
		want []string // delivered so far, after the op
	}
	cases := []struct {
		name string
		ops  []op
	}{
		{"plain items leave at once", []op{
			{do: "push", v: "a", want: []string{"a"}},
			{do: "push", v: "b", want: []string{"a", "b"}},
		}},
		{"a held item holds what follows until its delay ends", []op{
			{do: "push", v: "a", want: []string{"a"}},
			{do: "hold", v: "t1", d: 100 * time.Millisecond, want: []string{"a"}},
			{do: "push", v: "b", want: []string{"a"}},
			{do: "advance", d: 99 * time.Millisecond, want: []string{"a"}},
			{do: "advance", d: time.Millisecond, want: []string{"a", "t1", "b"}},
		}},
		{"release by key lets it go early, in order", []op{
			{do: "hold", v: "t1", d: time.Second, want: nil},
			{do: "push", v: "r", want: nil},
			{do: "release", v: "t1", want: []string{"t1", "r"}},
			{do: "advance", d: time.Second, want: []string{"t1", "r"}},
		}},
		{"releasing a later item does not pass an earlier held one", []op{
			{do: "hold", v: "t1", d: time.Second, want: nil},
			{do: "hold", v: "t2", d: time.Second, want: nil},
			{do: "release", v: "t2", want: nil},
			{do: "release", v: "t1", want: []string{"t1", "t2"}},
		}},
		{"flush releases everything", []op{
			{do: "hold", v: "t1", d: time.Second, want: nil},
			{do: "push", v: "x", want: nil},
			{do: "hold", v: "t2", d: time.Second, want: nil},
			{do: "flush", want: []string{"t1", "x", "t2"}},
		}},
		{"after close nothing is held", []op{
			{do: "hold", v: "t1", d: time.Second, want: nil},
			{do: "close", want: []string{"t1"}},
			{do: "hold", v: "t2", d: time.Second, want: []string{"t1", "t2"}},
		}},
		{"unknown key releases nothing", []op{
			{do: "hold", v: "t1", d: time.Second, want: nil},
			{do: "release", v: "zz", want: nil},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := &testutil.FakeClock{}
			r := &recorder{}
			q := queue.New(r.deliver, clock)
			for i, o := range c.ops {
				switch o.do {
				case "push":
					q.Push(o.v)
				case "hold":
					q.PushHeld(o.v, o.v, o.d)
				case "release":
					q.Release(o.v)
				case "flush":
					q.Flush()
				case "advance":
					clock.Advance(o.d)
				case "close":
					q.Close()
				}
				if got := r.all(); !slices.Equal(got, o.want) {
					t.Fatalf("op %d (%s %s): delivered %v, want %v", i, o.do, o.v, got, o.want)
				}
			}
		})
	}
}

// Concurrent pushes, releases and timer expiries never reorder items of one
// producer and never lose one.
func TestQueueConcurrentOrder(t *testing.T) {
	r := &recorder{}
	q := queue.New(r.deliver, nil)
	const n = 2000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			key := string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
			if i%7 == 0 {
				q.PushHeld(key, key, time.Duration(i%5)*time.Millisecond)
			} else {
				q.Push(key)
			}
			if i%11 == 0 {
				go q.Release(key)
			}
		}
	}()
	wg.Wait()
	q.Flush()
	got := r.all()
	if len(got) != n {
		t.Fatalf("delivered %d of %d", len(got), n)
	}
	for i := range n {
		key := string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		if got[i] != key {
			t.Fatalf("item %d is %s, want %s", i, got[i], key)
		}
	}
}
