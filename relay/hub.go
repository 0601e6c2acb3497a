package relay

import (
	"encoding/json"
	"sync"

	"github.com/ccrelay/ccrelay/protocol"
)

// hub fans stored envelopes out to the apps subscribed to their session,
// and session changes to the apps that listed the sessions.
type hub struct {
	mu      sync.Mutex
	subs    map[string]map[*subscriber]struct{}
	listers map[*lister]struct{}
}

// lister is an app connection's interest in its owner's session list.
// Changes wait in a queue (none while idle: nothing is allocated ahead)
// until the connection's writer (peer.run), woken through wake, takes
// them; a lister that lets subscriberSlack changes pile up is dropped.
type lister struct {
	owner   string
	wake    func() // the writer's kick: called after each change
	mu      sync.Mutex
	queue   [][]byte
	dropped chan struct{}
	once    sync.Once
}

// next takes the oldest waiting change, if any.
func (l *lister) next() ([]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) == 0 {
		l.queue = nil // let the backing array go
		return nil, false
	}
	b := l.queue[0]
	l.queue[0] = nil
	l.queue = l.queue[1:]
	return b, true
}

// push queues frame, or drops the lister when subscriberSlack wait.
func (l *lister) push(frame []byte) {
	l.mu.Lock()
	full := len(l.queue) >= subscriberSlack
	if !full {
		l.queue = append(l.queue, frame)
	}
	l.mu.Unlock()
	if full {
		l.once.Do(func() { close(l.dropped) })
	}
	l.wake()
}

// summary is a session as lists show it: a bounded summary of its info
// (summaryInfo), never the whole of it. The store holds only summaries
// (announcements are summarized before they are stored, and migration 4
// summarized what older versions kept), so lists send them as stored; one
// larger than a summary can be is summarized again.
func summary(si SessionInfo) protocol.SessionSummary {
	info := si.Info
	if len(info) > MaxSummaryBytes || len(info) == 0 || info[0] != '{' {
		info = summaryInfo(info)
	}
	return protocol.SessionSummary{ID: si.ID, Info: info, Prompt: si.Prompt, LastSeq: si.LastSeq, Updated: si.UpdatedMS}
}

// addLister registers a lister of owner's sessions whose writer wake
// starts.
func (h *hub) addLister(owner string, wake func()) *lister {
	l := &lister{owner: owner, wake: wake, dropped: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.listers == nil {
		h.listers = map[*lister]struct{}{}
	}
	h.listers[l] = struct{}{}
	return l
}

func (h *hub) removeLister(l *lister) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.listers, l)
}

// sessionChanged sends a session's new state to every lister; a lister
// that cannot keep up is dropped.
func (h *hub) sessionChanged(si SessionInfo) { h.sessionChangedSummary(si.Owner, summary(si)) }

func (h *hub) sessionChangedSummary(owner string, sum protocol.SessionSummary) {
	frame, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameSession, Sessions: []protocol.SessionSummary{sum}})
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.listers {
		if l.owner != owner {
			continue
		}
		l.push(frame)
	}
}

// subscriber is an app connection's subscription to a session's stored
// batches. Batches wait in a queue (none while idle: nothing is allocated
// ahead) until the connection's writer takes them, woken through wake; a
// subscriber that lets subscriberSlack batches pile up is dropped.
type subscriber struct {
	wake    func() // the writer's kick: called after each batch
	mu      sync.Mutex
	queue   []*published
	dropped chan struct{}
	once    sync.Once
}

// push queues p, or drops the subscriber when subscriberSlack wait.
func (sub *subscriber) push(p *published) {
	sub.mu.Lock()
	full := len(sub.queue) >= subscriberSlack
	if !full {
		sub.queue = append(sub.queue, p)
	}
	sub.mu.Unlock()
	if full {
		sub.once.Do(func() { close(sub.dropped) })
	}
	sub.wake()
}

// next takes the oldest waiting batch, if any.
func (sub *subscriber) next() (*published, bool) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if len(sub.queue) == 0 {
		sub.queue = nil // let the backing array go
		return nil, false
	}
	p := sub.queue[0]
	sub.queue[0] = nil
	sub.queue = sub.queue[1:]
	return p, true
}

// add subscribes to session's batches, for a writer that wake starts.
func (h *hub) add(session string, wake func()) *subscriber {
	sub := &subscriber{wake: wake, dropped: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[session] == nil {
		h.subs[session] = map[*subscriber]struct{}{}
	}
	h.subs[session][sub] = struct{}{}
	return sub
}

func (h *hub) remove(session string, sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[session], sub)
	if len(h.subs[session]) == 0 {
		delete(h.subs, session)
	}
}

// publish never blocks: a subscriber whose buffer is full is dropped (its
// app reconnects and catches up from its last sequence number).
func (h *hub) publish(session string, batch published) {
	p := &batch // shared by the subscribers, which only read it
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs[session] {
		sub.push(p)
	}
}

// followed reports whether some app here follows session.
func (h *hub) followed(session string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[session]) > 0
}

// wake tells session's subscribers that the store holds more than was
// published here (another relay stored it): each reads on from where it
// stands.
func (h *hub) wake(session string) { h.publish(session, published{wake: true}) }

// wakeAll wakes every subscriber (notices from other relays may have been
// missed).
func (h *hub) wakeAll() {
	h.mu.Lock()
	sessions := make([]string, 0, len(h.subs))
	for s := range h.subs {
		sessions = append(sessions, s)
	}
	h.mu.Unlock()
	for _, s := range sessions {
		h.wake(s)
	}
}
