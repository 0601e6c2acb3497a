package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/push"
)

// Notifications (docs/protocol.md, "Notifications"). A push carries no
// content: {"session", "kind", "seq"}. The app's service worker asks the
// relay for what it needs to write the text.

// Kinds of notification a device chooses from.
const (
	PushPermission = "permission" // a permission request is waiting
	PushTurn       = "turn"       // a turn finished (completed)
	PushFailed     = "failed"     // a turn failed, or Claude stopped with an error
	PushAgent      = "agent"      // a background agent (subagent) finished
)

// PushKinds lists the kinds, in the order apps show them.
var PushKinds = []string{PushPermission, PushTurn, PushFailed, PushAgent}

// PushAnswered is pushed, to the devices that chose PushPermission, when a
// permission request notified before is no longer waiting (answered in
// the app, on another device or in the terminal, or cancelled): their
// service worker replaces the notification that said Claude waits. It is
// not a kind a device chooses, and goes to devices that show the session
// too (they may hold the notification from before).
const PushAnswered = "answered"

// Limits of notifications.
const (
	// MaxPushDevices is how many devices of one token may be subscribed;
	// a new one beyond replaces the one that subscribed least recently. A
	// device has one subscription (subscribing again replaces it).
	MaxPushDevices = 16
	// MaxPushEndpointBytes bounds a subscription's endpoint URL.
	MaxPushEndpointBytes = 2048
	// MaxPushRequestBytes bounds the body of a request to /push/.
	MaxPushRequestBytes = 8 << 10
	// maxPushRecent events are remembered to send each once.
	maxPushRecent = 4096
	// maxPushTracked sessions (their announced state) and subagents (the
	// turn that started them) are remembered to tell what is new.
	maxPushTracked = 1024
)

// PushFile is the file in the data folder where older relays kept the
// devices' subscriptions: EnablePush moves them into the store once and
// renames it PushFile+".imported".
const PushFile = "push.json"

// validDeviceID reports whether id is a device id as the app chooses it
// (and keeps): 16 to 64 of A-Z, a-z, 0-9, _ and -. (A regular expression
// of it compiled at every start of every ccrelay command.)
func validDeviceID(id string) bool {
	if len(id) < 16 || len(id) > 64 {
		return false
	}
	for i := range len(id) {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// webPusher sends an encrypted message to a subscription (push.WebPush).
type webPusher interface {
	Send(sub push.Subscription, payload []byte, urgency string, ttl time.Duration, onGone func()) error
}

// ntfyPoster posts a generic text and a link (push.Ntfy).
type ntfyPoster interface {
	Send(title, text, link string) error
}

// PushOptions turn notifications on (Server.EnablePush).
type PushOptions struct {
	// PublicKey is the VAPID public key apps subscribe with (base64url);
	// WebPush sends with its private half. Both empty: no Web Push.
	PublicKey string
	WebPush   webPusher
	// Ntfy, when set, gets a post for every event (no device needed).
	Ntfy ntfyPoster
	// AppURL is the app's address, for ntfy's links.
	AppURL string
	// ImportFile is a PushFile an older relay kept ("": none): its
	// subscriptions are moved into the store once.
	ImportFile string
	// AllowHTTPEndpoints takes push endpoints over plain http (tests'
	// fake push service); otherwise only https endpoints are taken.
	AllowHTTPEndpoints bool
}

// pushDevice is a device's subscription (as PushFile kept it, too).
type pushDevice struct {
	Sub     push.Subscription `json:"subscription"`
	Kinds   []string          `json:"kinds"`
	Updated int64             `json:"updated"` // Unix ms
}

type pushVisibility struct {
	id                     int64 // the connection's number on this relay (push_visible.conn)
	owner, device, session string
	visible                bool
}

type pushAnnounced struct {
	perms   []string // permission ids notified
	waiting bool
	err     string
	agent   string // the session's agent, "" where its info is sealed (agentOf)
}

// pushState is the Server's notification state. The subscriptions are
// in the store (pushstore.go), shared by the relays on one database; so
// is, on PostgreSQL, what each relay's app connections show.
type pushState struct {
	mu       sync.Mutex
	opts     *PushOptions // nil: notifications off
	visible  map[*websocket.Conn]pushVisibility
	lastConn int64 // the last pushVisibility.id given
	recent   fifoSet[struct{}]
	agents   fifoSet[string]         // session/subagent -> the turn it started in
	ann      fifoSet[*pushAnnounced] // session -> what its announcements said
}

// pushStoreTimeout bounds what notifications ask the store outside a
// request (a push sent, a connection gone).
const pushStoreTimeout = 10 * time.Second

// fifoSet is a map that forgets its oldest keys beyond a bound.
type fifoSet[V any] struct {
	m     map[string]V
	order []string
}

func (f *fifoSet[V]) get(k string) (V, bool) { v, ok := f.m[k]; return v, ok }

// forget removes k (its place in the order goes with the next evictions).
func (f *fifoSet[V]) forget(k string) { delete(f.m, k) }

func (f *fifoSet[V]) put(k string, v V, bound int) {
	if f.m == nil {
		f.m = map[string]V{}
	}
	if _, ok := f.m[k]; !ok {
		f.order = append(f.order, k)
		if len(f.order) > bound {
			delete(f.m, f.order[0])
			f.order = slices.Delete(f.order, 0, 1)
		}
	}
	f.m[k] = v
}

// EnablePush turns notifications on. The subscriptions are in the store;
// o.ImportFile's, if it exists, are moved there first (then it is renamed
// PushFile+".imported"), unless they were made with another VAPID key than
// o.PublicKey (the key file beside it says so): their devices must then
// subscribe again. It may be called while the relay serves (events before
// it are not notified).
func (s *Server) EnablePush(o PushOptions) error {
	if s.store == nil {
		return errors.New("notifications need the relay's store")
	}
	if o.ImportFile != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := s.importPushFile(ctx, o)
		cancel()
		if err != nil {
			return err
		}
	}
	p := &s.push
	p.mu.Lock()
	defer p.mu.Unlock()
	p.opts = &o
	return nil
}

// importPushFile moves an older relay's subscriptions into the store.
func (s *Server) importPushFile(ctx context.Context, o PushOptions) error {
	file := o.ImportFile
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read push subscriptions: %w", err)
	}
	var devices map[string]map[string]*pushDevice
	if err := json.Unmarshal(b, &devices); err != nil {
		return fmt.Errorf("push subscriptions %s: %w (delete it; devices then subscribe again)", file, err)
	}
	// What the file says is checked as a device's subscription is: an
	// https endpoint on a public address, known kinds.
	dropped := 0
	for owner, devs := range devices {
		for dev, d := range devs {
			if d == nil || checkPushTarget(d.Sub, d.Kinds, &o) != nil {
				delete(devs, dev)
				dropped++
			}
		}
		if len(devs) == 0 {
			delete(devices, owner)
		}
	}
	if dropped > 0 {
		s.log.Warn("push subscriptions in the file that are not valid are not imported", "file", file, "dropped", dropped)
	}
	n := 0
	if k, err := push.ReadKeyFile(filepath.Dir(file)); err == nil && o.PublicKey != "" && k.PublicKey() != o.PublicKey {
		s.log.Warn("push subscriptions made with another VAPID key than the store's are not imported; their devices must subscribe again", "file", file)
	} else if n, err = s.store.importPushDevices(ctx, devices, MaxPushDevices); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := os.Rename(file, file+".imported"); err != nil {
		return fmt.Errorf("push subscriptions imported, but %w", err)
	}
	s.log.Info("push subscriptions moved into the store", "file", file, "subscriptions", n)
	return nil
}

// --- what apps say: visibility ----------------------------------------------

// setVisibility records what an app connection shows: a session (or none)
// and whether the page is visible. A device is not notified of a session
// one of its connections shows visibly.
func (s *Server) setVisibility(ctx context.Context, c *websocket.Conn, f protocol.Frame) error {
	if f.Session != "" {
		if err := checkSession(f.Session); err != nil {
			return writeFrame(ctx, c, errorFrame("bad-visibility", "%v", err))
		}
	}
	if f.Device != "" && !validDeviceID(f.Device) {
		return writeFrame(ctx, c, errorFrame("bad-visibility", "device id: 16 to 64 letters, digits, '-' or '_'"))
	}
	p := &s.push
	p.mu.Lock()
	if p.visible == nil {
		p.visible = map[*websocket.Conn]pushVisibility{}
	}
	dev := f.Device
	if dev != "" {
		dev = pushDeviceKey(ctx, dev)
	}
	v, known := p.visible[c]
	if !known {
		p.lastConn++
		v.id = p.lastConn
	}
	was := v
	v.owner, v.device, v.session, v.visible = ownerFrom(ctx), dev, f.Session, f.Visible
	p.visible[c] = v
	p.mu.Unlock()
	// The other relays ask the store (the connection's frames come one by
	// one: its rows are written in order); a frame that changes nothing
	// writes nothing (the row is refreshed with cli_presence).
	if s.fan != nil && (!known || v != was) {
		if err := s.store.putVisible(ctx, s.fan.node, v.id, v); err != nil {
			s.log.Warn("the other relays may notify a session this app shows", "err", err)
		}
	}
	return nil
}

// dropVisibility forgets a connection that ended.
func (s *Server) dropVisibility(c *websocket.Conn) {
	s.push.mu.Lock()
	v, known := s.push.visible[c]
	delete(s.push.visible, c)
	s.push.mu.Unlock()
	if known && s.fan != nil {
		ctx, cancel := context.WithTimeout(context.Background(), pushStoreTimeout)
		defer cancel()
		if err := s.store.dropVisible(ctx, s.fan.node, v.id); err != nil {
			s.log.Warn("a closed app connection may keep its session quiet until its row is stale", "err", err)
		}
	}
}

// shownTo says (p.mu held) whether session is shown visibly on a
// connection of owner's device ("" device: on any of owner's) on this
// relay.
func (p *pushState) shownTo(owner, device, session string) bool {
	for _, v := range p.visible {
		if v.owner == owner && v.session == session && v.visible && (device == "" || v.device == device) {
			return true
		}
	}
	return false
}

// --- events -------------------------------------------------------------------

// pushStored notifies what newly stored envelopes of session say: a turn
// that ended (completed or failed), a background agent that finished.
func (s *Server) pushStored(ctx context.Context, session string, rows []Stored) {
	if !s.pushOn() {
		return
	}
	for _, r := range rows {
		if !bytes.Contains(r.Body, []byte(`"turn-end"`)) && !bytes.Contains(r.Body, []byte(`"start"`)) && !bytes.Contains(r.Body, []byte(`"stop"`)) {
			continue
		}
		var e struct {
			Turn     string `json:"turn"`
			Subagent string `json:"subagent"`
			Ev       struct {
				T      string `json:"t"`
				Status string `json:"status"`
			} `json:"ev"`
		}
		if json.Unmarshal(r.Body, &e) != nil {
			continue
		}
		switch {
		case e.Ev.T == string(protocol.KindTurnEnd) && e.Ev.Status == string(protocol.StatusCompleted):
			s.pushEvent(ctx, ownerFrom(ctx), session, PushTurn, r.Seq, "")
		case e.Ev.T == string(protocol.KindTurnEnd) && e.Ev.Status == string(protocol.StatusFailed):
			s.pushEvent(ctx, ownerFrom(ctx), session, PushFailed, r.Seq, "")
		case e.Ev.T == string(protocol.KindStart) && e.Subagent != "":
			s.push.mu.Lock()
			s.push.agents.put(session+"/"+e.Subagent, e.Turn, maxPushTracked)
			s.push.mu.Unlock()
		case e.Ev.T == string(protocol.KindStop) && e.Subagent != "":
			// A subagent that stops in the turn it started in is part of
			// that turn; one that outlived it ran in the background.
			s.push.mu.Lock()
			started, known := s.push.agents.get(session + "/" + e.Subagent)
			s.push.mu.Unlock()
			if known && started != e.Turn {
				s.pushEvent(ctx, ownerFrom(ctx), session, PushAgent, r.Seq, "")
			}
		}
	}
}

// pushAnnounced notifies what an announcement says that the previous one
// of the session did not: a permission request that waits (each once, by
// its id), an error.
func (s *Server) pushAnnounced(ctx context.Context, si SessionInfo, info json.RawMessage) {
	if !s.pushOn() {
		return
	}
	var a struct {
		Status      string `json:"status"`
		Error       string `json:"error"`
		Permissions []struct {
			ID string `json:"id"`
		} `json:"permissions"`
	}
	if json.Unmarshal(info, &a) != nil {
		return
	}
	p := &s.push
	p.mu.Lock()
	was, ok := p.ann.get(si.ID)
	if !ok {
		was = &pushAnnounced{}
	}
	now := &pushAnnounced{waiting: a.Status == "waiting-for-permission", err: a.Error, agent: agentOf(info)}
	var fresh []string
	for _, q := range a.Permissions {
		if q.ID == "" || slices.Contains(now.perms, q.ID) {
			continue
		}
		now.perms = append(now.perms, q.ID)
		if !slices.Contains(was.perms, q.ID) {
			fresh = append(fresh, q.ID)
		}
	}
	p.ann.put(si.ID, now, maxPushTracked)
	p.mu.Unlock()
	owner := ownerFrom(ctx)
	for _, id := range fresh {
		s.pushEvent(ctx, owner, si.ID, PushPermission, si.LastSeq, "request:"+id)
	}
	if now.waiting && !was.waiting && len(now.perms) == 0 {
		// Waiting without the requests listed (Claude in the terminal).
		s.pushEvent(ctx, owner, si.ID, PushPermission, si.LastSeq, "")
	}
	if now.err != "" && now.err != was.err {
		s.pushEvent(ctx, owner, si.ID, PushFailed, si.LastSeq, "")
	}
	s.pushNoLongerWaiting(ctx, owner, si, was, now)
}

// pushNoLongerWaiting pushes PushAnswered for what was announced as
// waiting (was) and no longer is (now): each request by its id, and a wait
// notified without requests.
func (s *Server) pushNoLongerWaiting(ctx context.Context, owner string, si SessionInfo, was, now *pushAnnounced) {
	for _, id := range was.perms {
		if !slices.Contains(now.perms, id) {
			s.pushEvent(ctx, owner, si.ID, PushAnswered, si.LastSeq, "request:"+id)
		}
	}
	if was.waiting && len(was.perms) == 0 && !now.waiting {
		s.pushEvent(ctx, owner, si.ID, PushAnswered, si.LastSeq, "")
	}
}

// pushCLIGone: the session's CLI is gone for good (markCLIGone), so the
// requests notified before no longer wait: nothing will answer them.
func (s *Server) pushCLIGone(ctx context.Context, si SessionInfo) {
	if !s.pushOn() {
		return
	}
	p := &s.push
	p.mu.Lock()
	was, ok := p.ann.get(si.ID)
	now := &pushAnnounced{}
	if ok {
		now.err = was.err
		p.ann.put(si.ID, now, maxPushTracked)
	}
	p.mu.Unlock()
	if ok {
		s.pushNoLongerWaiting(ctx, si.Owner, si, was, now)
	}
}

func (s *Server) pushOn() bool {
	s.push.mu.Lock()
	defer s.push.mu.Unlock()
	return s.push.opts != nil
}

// pushPayload is all a push says.
type pushPayload struct {
	Session string `json:"session"`
	Kind    string `json:"kind"`
	Seq     int64  `json:"seq"`
}

// ntfyText is what ntfy is told of each kind for a session of agent
// (protocol.AgentClaude, protocol.AgentCodex; "": not known, a sealed
// session's): never a session's content.
func ntfyText(kind, agent string) string {
	who := map[string]string{protocol.AgentClaude: "Claude", protocol.AgentCodex: "Codex"}[agent]
	switch kind {
	case PushPermission:
		if who == "" {
			return "A session is waiting for your permission"
		}
		return who + " is waiting for your permission"
	case PushTurn:
		if who == "" {
			return "A session finished a turn"
		}
		return who + " finished a turn"
	case PushFailed:
		if who == "" {
			return "A session failed"
		}
		return "A " + who + " session failed"
	case PushAgent:
		return "A background agent finished"
	}
	return ""
}

// agentOf is the agent an announced info names: its "agent" (Claude
// Code's when an older CLI names none), or "" for a sealed info, whose
// agent is sealed with it.
func agentOf(info json.RawMessage) string {
	var a struct {
		Agent  string `json:"agent"`
		Sealed string `json:"sealed"`
	}
	_ = json.Unmarshal(info, &a)
	switch {
	case protocol.KnownAgent(a.Agent):
		return a.Agent
	case a.Sealed != "":
		return ""
	}
	return protocol.AgentClaude
}

// pushEvent notifies owner's devices that chose kind, except those that
// show session visibly (on any relay), once per event: session, kind and
// seq (and, for events that share a seq, what tells them apart).
func (s *Server) pushEvent(ctx context.Context, owner, session, kind string, seq int64, distinct string) {
	p := &s.push
	key := session + "/" + kind + "/" + strconv.FormatInt(seq, 10) + "/" + distinct
	p.mu.Lock()
	if p.opts == nil {
		p.mu.Unlock()
		return
	}
	if _, seen := p.recent.get(key); seen {
		p.mu.Unlock()
		return
	}
	p.recent.put(key, struct{}{}, maxPushRecent)
	opts := p.opts
	p.mu.Unlock()

	// What the store says: the devices, and what the other relays' apps
	// show. An event is pushed even if its connection ends meanwhile.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pushStoreTimeout)
	defer cancel()
	var devices map[string]pushDevice
	if opts.WebPush != nil {
		var err error
		if devices, err = s.store.pushDevicesOf(ctx, owner); err != nil {
			s.log.Error("push subscriptions", "session", session, "kind", kind, "err", err)
		}
	}
	var elsewhere map[string]bool // device -> shown on another relay
	if s.fan != nil {
		var err error
		if elsewhere, err = s.store.visibleDevices(ctx, owner, session, time.Now().Add(-presenceStale)); err != nil {
			s.log.Warn("notified without asking the other relays what their apps show", "session", session, "err", err)
		}
	}

	type target struct {
		device string
		sub    push.Subscription
	}
	var targets []target
	p.mu.Lock()
	for dev, d := range devices {
		if kind == PushAnswered {
			if slices.Contains(d.Kinds, PushPermission) {
				targets = append(targets, target{dev, d.Sub})
			}
			continue
		}
		if slices.Contains(d.Kinds, kind) && !elsewhere[dev] && !p.shownTo(owner, dev, session) {
			targets = append(targets, target{dev, d.Sub})
		}
	}
	// ntfy's posts cannot be replaced: nothing is posted for an answer.
	ntfy := opts.Ntfy != nil && kind != PushAnswered && len(elsewhere) == 0 && !p.shownTo(owner, "", session)
	agent := protocol.AgentClaude // a session not announced since this relay started: as before agents were named
	if a, ok := p.ann.get(session); ok {
		agent = a.agent
	}
	p.mu.Unlock()

	payload, _ := json.Marshal(pushPayload{Session: session, Kind: kind, Seq: seq})
	urgency := push.UrgencyNormal
	if kind == PushPermission || kind == PushAnswered {
		// An answer replaces a notification that says Claude waits: as
		// soon as the request's.
		urgency = push.UrgencyHigh
	}
	for _, t := range targets {
		err := opts.WebPush.Send(t.sub, payload, urgency, push.DefaultTTL, func() { s.pushGone(owner, t.device, t.sub) })
		s.pushCounted("webpush", err)
		if err != nil {
			s.log.Warn("push not queued", "session", session, "kind", kind, "err", err)
		}
	}
	if ntfy {
		link := ""
		if opts.AppURL != "" {
			link = opts.AppURL + "/#/s/" + session
		}
		err := opts.Ntfy.Send("ccrelay", ntfyText(kind, agent), link)
		s.pushCounted("ntfy", err)
		if err != nil {
			s.log.Warn("ntfy not queued", "session", session, "kind", kind, "err", err)
		}
	}
}

// pushGone removes a subscription its push service no longer knows (404,
// 410), unless the device subscribed again meanwhile.
func (s *Server) pushGone(owner, device string, sub push.Subscription) {
	ctx, cancel := context.WithTimeout(context.Background(), pushStoreTimeout)
	defer cancel()
	if _, err := s.store.deletePushDevice(ctx, owner, device, &sub); err != nil {
		s.log.Error("push subscriptions", "err", err)
	}
}

// --- the HTTP endpoint ----------------------------------------------------------

// pushSubscribeRequest is the body of PUT /push/subscription.
type pushSubscribeRequest struct {
	Device       string            `json:"device"`
	Subscription push.Subscription `json:"subscription"`
	Kinds        []string          `json:"kinds"`
}

// servePush answers /push/ (behind auth):
//
//	GET    /push/key                      {"publicKey", "kinds", "webPush", "ntfy"}
//	GET    /push/subscription?device=ID   {"kinds"} of the device, 404 if none
//	PUT    /push/subscription             {"device", "subscription", "kinds"}
//	DELETE /push/subscription?device=ID
//	GET    /push/session?id=SESSION       the session as lists show it
func (s *Server) servePush(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	p := &s.push
	p.mu.Lock()
	opts := p.opts
	p.mu.Unlock()
	if opts == nil {
		pushError(w, http.StatusNotFound, "notifications are off on this relay")
		return
	}
	owner := ownerFrom(r.Context())
	switch r.URL.Path {
	case "/push/key":
		if r.Method != http.MethodGet {
			pushError(w, http.StatusMethodNotAllowed, "GET only")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"publicKey": opts.PublicKey, "kinds": PushKinds, "webPush": opts.WebPush != nil, "ntfy": opts.Ntfy != nil})
	case "/push/subscription":
		switch r.Method {
		case http.MethodGet:
			dev := pushDeviceKey(r.Context(), r.URL.Query().Get("device"))
			d, ok, err := s.store.pushDevice(r.Context(), owner, dev)
			if err != nil {
				s.log.Error("push subscriptions", "err", err)
				pushError(w, http.StatusInternalServerError, "the relay's store failed; see its log")
				return
			}
			if !ok {
				pushError(w, http.StatusNotFound, "this device is not subscribed")
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"kinds": d.Kinds})
		case http.MethodPut:
			var req pushSubscribeRequest
			if err := json.NewDecoder(io.LimitReader(r.Body, MaxPushRequestBytes+1)).Decode(&req); err != nil {
				pushError(w, http.StatusBadRequest, "not a JSON subscription of at most "+strconv.Itoa(MaxPushRequestBytes)+" bytes: "+err.Error())
				return
			}
			if err := s.checkSubscription(req, opts); err != nil {
				pushError(w, http.StatusBadRequest, err.Error())
				return
			}
			req.Device = pushDeviceKey(r.Context(), req.Device)
			if err := s.subscribe(r.Context(), owner, req); err != nil {
				s.log.Error("push subscriptions", "err", err)
				pushError(w, http.StatusInternalServerError, "the relay could not save the subscription; see its log")
				return
			}
			w.WriteHeader(http.StatusNoContent)
		case http.MethodDelete:
			dev := pushDeviceKey(r.Context(), r.URL.Query().Get("device"))
			if _, err := s.store.deletePushDevice(r.Context(), owner, dev, nil); err != nil {
				s.log.Error("push subscriptions", "err", err)
				pushError(w, http.StatusInternalServerError, "the relay could not remove the subscription; see its log")
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			pushError(w, http.StatusMethodNotAllowed, "GET, PUT or DELETE")
		}
	case "/push/session":
		id := r.URL.Query().Get("id")
		if err := checkSession(id); err != nil {
			pushError(w, http.StatusBadRequest, err.Error())
			return
		}
		if s.mine(r.Context(), id) != nil {
			pushError(w, http.StatusNotFound, "no session "+id+" for this token")
			return
		}
		si, err := s.store.session(r.Context(), id)
		if err != nil {
			s.storeFailed("push session", id, err)
			pushError(w, http.StatusInternalServerError, "the relay's store failed; see its log")
			return
		}
		writeJSON(w, http.StatusOK, summary(si))
	default:
		pushError(w, http.StatusNotFound, "no such push endpoint")
	}
}

// pushDeviceKey is the key of a device's subscription: the id the app
// chose, within the credential that sent it, so that a paired device can
// neither read, replace nor remove another's (a bootstrap token has no
// credential: its ids are the app's own).
func pushDeviceKey(ctx context.Context, device string) string {
	if id := principalFrom(ctx).cred.ID; id != "" {
		return id + ":" + device
	}
	return device
}

// forgetPushDevices removes the subscriptions of a credential (revoked):
// its device hears nothing more.
func (s *Server) forgetPushDevices(ctx context.Context, credID string) {
	if s.store == nil {
		return
	}
	if _, err := s.store.forgetPushDevices(context.WithoutCancel(ctx), credID); err != nil {
		s.log.Error("push subscriptions of a revoked credential", "err", err)
	}
}

// publicHost reports whether host (a name or an IP) may be on the public
// Internet: an IP that is not, and localhost names, are refused.
func publicHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return false
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return push.PublicAddress(a)
	}
	return true
}

func (s *Server) checkSubscription(req pushSubscribeRequest, opts *PushOptions) error {
	if opts.WebPush == nil {
		return errors.New("Web Push is off on this relay")
	}
	if !validDeviceID(req.Device) {
		return errors.New("device id: 16 to 64 letters, digits, '-' or '_'")
	}
	return checkPushTarget(req.Subscription, req.Kinds, opts)
}

// checkPushTarget checks a subscription and its kinds as a device gives
// them (and as an older relay's file kept them).
func checkPushTarget(sub push.Subscription, kinds []string, opts *PushOptions) error {
	ep := sub.Endpoint
	if len(ep) > MaxPushEndpointBytes {
		return fmt.Errorf("endpoint is %d bytes, more than %d", len(ep), MaxPushEndpointBytes)
	}
	u, err := url.Parse(ep)
	if err != nil || !(u.Scheme == "https" || u.Scheme == "http" && opts.AllowHTTPEndpoints) || u.Host == "" || u.User != nil {
		return errors.New("endpoint is not an https URL")
	}
	if !opts.AllowHTTPEndpoints && !publicHost(u.Hostname()) {
		// The sender refuses such addresses when it dials (push.
		// ErrPrivateAddress); said here at once, to the device.
		return errors.New("endpoint is not on a public address")
	}
	if err := sub.Check(); err != nil {
		return err
	}
	for i, k := range kinds {
		if !slices.Contains(PushKinds, k) || slices.Contains(kinds[:i], k) {
			return fmt.Errorf("kind %q: each of %v at most once", k, PushKinds)
		}
	}
	return nil
}

// subscribe keeps a device's subscription (replacing its previous one); a
// device beyond MaxPushDevices replaces the least recently subscribed.
func (s *Server) subscribe(ctx context.Context, owner string, req pushSubscribeRequest) error {
	kinds := req.Kinds
	if kinds == nil {
		kinds = []string{}
	}
	return s.store.putPushDevice(ctx, owner, req.Device, pushDevice{Sub: req.Subscription, Kinds: kinds, Updated: s.now().UnixMilli()}, MaxPushDevices)
}

func pushError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
