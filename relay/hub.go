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

type lister struct {
	owner   string
	ch      chan []byte
	dropped chan struct{}
	once    sync.Once
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

func (h *hub) addLister(owner string) *lister {
	l := &lister{owner: owner, ch: make(chan []byte, subscriberSlack), dropped: make(chan struct{})}
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
		select {
		case l.ch <- frame:
		default:
			l.once.Do(func() { close(l.dropped) })
		}
	}
}

type subscriber struct {
	ch      chan *published // pointers: the buffer is allocated whole, and small elements keep an idle app cheap
	dropped chan struct{}
	once    sync.Once
}

func (h *hub) add(session string) *subscriber {
	sub := &subscriber{ch: make(chan *published, subscriberSlack), dropped: make(chan struct{})}
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
		select {
		case sub.ch <- p:
		default:
			sub.once.Do(func() { close(sub.dropped) })
		}
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
