package push

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// Limits of delivery (docs/protocol.md, "Notifications").
const (
	// MaxQueue is how many messages may wait to be sent (retries
	// included); one more is refused with ErrQueueFull.
	MaxQueue = 256
	// MaxAttempts is how many times a message is tried: a network error,
	// a 429 or a 5xx is tried again after a backoff.
	MaxAttempts = 4
	// RetryMin is the first backoff; it doubles to at most RetryMax (a
	// Retry-After from the service counts, up to RetryMax).
	RetryMin = time.Second
	RetryMax = time.Minute
	// SendTimeout bounds one request to a push service or ntfy.
	SendTimeout = 15 * time.Second
	// maxResponseBytes of an answer are read (to reuse the connection).
	maxResponseBytes = 4 << 10
)

// ErrQueueFull is returned when MaxQueue messages wait already.
var ErrQueueFull = errors.New("push: queue full")

// outcome of one request.
type outcome int

const (
	sent outcome = iota
	retry
	gone   // the subscription no longer exists (404, 410)
	failed // refused for good (another 4xx)
)

// job is one message: do makes the request (a fresh one each attempt).
type job struct {
	do      func() (*http.Request, error)
	onGone  func()
	what    string
	attempt int
	due     time.Time
}

// queue delivers jobs one at a time in order, with retries. Run owns its
// one goroutine; add never blocks.
type queue struct {
	client *http.Client
	log    *slog.Logger
	// Backoff gives the wait before attempt n+1 (n ≥ 1); tests shorten it.
	backoff func(n int, retryAfter time.Duration) time.Duration
	in      chan *job
}

func newQueue(client *http.Client, log *slog.Logger) *queue {
	if client == nil {
		client = &http.Client{Timeout: SendTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if log == nil {
		log = slog.Default()
	}
	return &queue{client: client, log: log, backoff: backoff, in: make(chan *job, MaxQueue)}
}

// backoff doubles from RetryMin to RetryMax; a service's Retry-After wins
// when longer (up to RetryMax).
func backoff(n int, retryAfter time.Duration) time.Duration {
	d := RetryMin << min(n-1, 16)
	d = max(d, retryAfter)
	return min(d, RetryMax)
}

func (q *queue) add(j *job) error {
	select {
	case q.in <- j:
		return nil
	default:
		return ErrQueueFull
	}
}

// run sends until ctx ends. Jobs waiting for a retry are kept here (they
// count against MaxQueue with those in the channel: at most MaxQueue in
// all, as a retry is taken from the channel first).
func (q *queue) run(ctx context.Context) {
	var waiting []*job
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := time.Duration(-1)
		if len(waiting) > 0 {
			soonest := waiting[0].due
			for _, j := range waiting[1:] {
				if j.due.Before(soonest) {
					soonest = j.due
				}
			}
			next = max(time.Until(soonest), 0)
		}
		var tc <-chan time.Time
		if next >= 0 {
			timer.Reset(next)
			tc = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case j := <-q.in:
			waiting = q.attempt(ctx, j, waiting)
		case <-tc:
			now := time.Now()
			var later []*job
			var due []*job
			for _, j := range waiting {
				if !j.due.After(now) {
					due = append(due, j)
				} else {
					later = append(later, j)
				}
			}
			waiting = later
			for _, j := range due {
				waiting = q.attempt(ctx, j, waiting)
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// attempt sends j once and, when it should be tried again, adds it to
// waiting (unless MaxAttempts are spent or MaxQueue jobs wait).
func (q *queue) attempt(ctx context.Context, j *job, waiting []*job) []*job {
	j.attempt++
	res, after := q.send(ctx, j)
	switch res {
	case sent:
	case gone:
		q.log.Info("push subscription gone; removed", "to", j.what)
		if j.onGone != nil {
			j.onGone()
		}
	case retry:
		if j.attempt >= MaxAttempts {
			q.log.Warn("push not delivered; giving up", "to", j.what, "attempts", j.attempt)
			break
		}
		if len(waiting)+len(q.in) >= MaxQueue {
			q.log.Warn("push not delivered; retry queue full", "to", j.what)
			break
		}
		j.due = time.Now().Add(q.backoff(j.attempt, after))
		waiting = append(waiting, j)
	}
	return waiting
}

func (q *queue) send(ctx context.Context, j *job) (outcome, time.Duration) {
	req, err := j.do()
	if err != nil {
		q.log.Warn("push not sent", "to", j.what, "err", err)
		return failed, 0
	}
	rctx, cancel := context.WithTimeout(ctx, SendTimeout)
	defer cancel()
	res, err := q.client.Do(req.WithContext(rctx))
	if err != nil {
		if ctx.Err() != nil {
			return failed, 0
		}
		q.log.Debug("push failed; will retry", "to", j.what, "err", err)
		return retry, 0
	}
	io.Copy(io.Discard, io.LimitReader(res.Body, maxResponseBytes))
	res.Body.Close()
	switch c := res.StatusCode; {
	case c >= 200 && c < 300:
		return sent, 0
	case c == http.StatusNotFound || c == http.StatusGone:
		return gone, 0
	case c == http.StatusTooManyRequests || c >= 500:
		secs, _ := strconv.Atoi(res.Header.Get("Retry-After"))
		return retry, time.Duration(max(secs, 0)) * time.Second
	default:
		q.log.Warn("push refused", "to", j.what, "status", res.Status)
		return failed, 0
	}
}
