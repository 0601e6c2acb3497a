package relay

import (
	"context"
	"time"
)

// Retention limits, named so that docs and tests agree.
const (
	// RetentionBatch is how many sessions one pruning transaction deletes
	// at most: the writer is held for one batch, then appends run.
	RetentionBatch = 4
	// RetentionEvery is how often the relay looks for sessions to prune.
	RetentionEvery = time.Minute
	// ReclaimBatch is how many free pages one incremental vacuum gives back.
	ReclaimBatch = 128
	// RetentionPause is the rest between two batches (of sessions or of
	// pages), in which waiting appends run.
	RetentionPause = 2 * time.Millisecond
)

// Retention removes the sessions whose last activity is older than Keep,
// in batches of RetentionBatch, and gives the freed pages back to the file
// system. Run it in a goroutine; it returns when ctx ends.
type Retention struct {
	Keep  time.Duration
	Every time.Duration    // zero: RetentionEvery
	Now   func() time.Time // zero: time.Now

	// Pruned, when set, is called after each pass with the sessions it
	// deleted (tests).
	Pruned func(n int)
}

// RunRetention prunes now and then every r.Every until ctx ends.
func (s *Server) RunRetention(ctx context.Context, r Retention) {
	every := r.Every
	if every <= 0 {
		every = RetentionEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n := s.PruneOnce(ctx, r)
		if r.Pruned != nil {
			r.Pruned(n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PruneOnce deletes every session inactive for longer than r.Keep, batch
// by batch (appends run between batches), tells the owners' apps, then
// reclaims free pages. It returns how many sessions it deleted.
func (s *Server) PruneOnce(ctx context.Context, r Retention) int {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	before := now().Add(-r.Keep)
	total := 0
	for ctx.Err() == nil {
		// One transaction on the store's one writer connection: appends
		// (the group committer) wait for it, and one to a pruned session
		// after it is refused by the tombstone.
		gone, err := s.store.PruneInactive(ctx, before, RetentionBatch)
		if err != nil {
			if ctx.Err() == nil {
				s.storeFailed("retention", "", err)
			}
			break
		}
		for _, si := range gone {
			s.hub.sessionDeleted(si.Owner, si.ID)
			s.fanSend(ctx, fanMsg{Kind: "s", Session: si.ID, Owner: si.Owner})
		}
		total += len(gone)
		s.dp.retained.Add(int64(len(gone)))
		if len(gone) < RetentionBatch || !pause(ctx) {
			break
		}
	}
	if total > 0 {
		s.log.Info("retention: sessions deleted", "sessions", total, "inactive since before", before.UTC().Format(time.RFC3339))
	}
	if s.store.Incremental(ctx) {
		prev := int64(-1)
		for ctx.Err() == nil {
			free, err := s.store.ReclaimPages(ctx, ReclaimBatch)
			if err != nil {
				if ctx.Err() == nil {
					s.storeFailed("reclaim", "", err)
				}
				break
			}
			if free == 0 || (prev >= 0 && free >= prev) || !pause(ctx) {
				break
			}
			prev = free
		}
	}
	return total
}

// pause rests RetentionPause; false when ctx ended.
func pause(ctx context.Context) bool {
	t := time.NewTimer(RetentionPause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
