// Package pushtest is a fake Web Push service for tests: an HTTP server on
// 127.0.0.1 that checks each message's VAPID token (RFC 8292) against the
// relay's public key, decrypts its payload (RFC 8291) with the
// subscription's private key, and records it.
package pushtest

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/push"
)

// Message is one push the service accepted.
type Message struct {
	Sub     string // the subscription's name
	Payload []byte // decrypted
	TTL     int
	Urgency string
}

// Service is the fake push service.
type Service struct {
	t      testing.TB
	srv    *httptest.Server
	key    string // the application server key subscriptions were made with
	mu     sync.Mutex
	subs   map[string]*sub
	msgs   []Message
	got    chan Message
	errors []string
}

type sub struct {
	name   string
	priv   *ecdh.PrivateKey
	auth   []byte
	status []int // answers to give before 201, in order
}

// New starts a service that accepts messages signed by the VAPID key
// appKey (base64url, as browsers are given it). It stops at the test's end.
func New(t testing.TB, appKey string) *Service {
	s := &Service{t: t, key: appKey, subs: map[string]*sub{}, got: make(chan Message, 1024)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// Subscribe makes a subscription (its own key pair and auth secret), as a
// browser's PushManager.subscribe does.
func (s *Service) Subscribe(name string) push.Subscription {
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		s.t.Fatal(err)
	}
	auth := make([]byte, 16)
	rand.Read(auth)
	s.mu.Lock()
	s.subs[name] = &sub{name: name, priv: priv, auth: auth}
	s.mu.Unlock()
	var out push.Subscription
	out.Endpoint = s.srv.URL + "/push/" + name
	out.Keys.P256dh = base64.RawURLEncoding.EncodeToString(priv.PublicKey().Bytes())
	out.Keys.Auth = base64.RawURLEncoding.EncodeToString(auth)
	return out
}

// Answer makes the next messages to the subscription get these statuses
// (then 201 again); 404 or 410 mean "gone".
func (s *Service) Answer(name string, statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs[name].status = append(s.subs[name].status, statuses...)
}

// Next waits (up to timeout) for the next accepted message.
func (s *Service) Next(timeout time.Duration) (Message, bool) {
	select {
	case m := <-s.got:
		return m, true
	case <-time.After(timeout):
		return Message{}, false
	}
}

// Messages are the messages accepted so far.
func (s *Service) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Errors are the requests the service refused as malformed (bad token,
// undecryptable payload, missing headers): a test fails if any.
func (s *Service) Errors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.errors...)
}

func (s *Service) refuse(w http.ResponseWriter, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.errors = append(s.errors, msg)
	s.mu.Unlock()
	http.Error(w, msg, http.StatusBadRequest)
}

func (s *Service) serve(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/push/")
	s.mu.Lock()
	sb := s.subs[name]
	s.mu.Unlock()
	if r.Method != http.MethodPost || !ok || sb == nil {
		http.NotFound(w, r)
		return
	}
	key, _, err := push.VerifyAuthorization(r.Header.Get("Authorization"), s.srv.URL, time.Now())
	if err != nil {
		s.refuse(w, "vapid: %v", err)
		return
	}
	if key != s.key {
		s.refuse(w, "vapid key %s is not the one the subscription was made with", key)
		return
	}
	if r.Header.Get("Content-Encoding") != "aes128gcm" {
		s.refuse(w, "Content-Encoding %q", r.Header.Get("Content-Encoding"))
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get("TTL"))
	if err != nil || ttl < 0 {
		s.refuse(w, "TTL %q", r.Header.Get("TTL"))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8192))
	if err != nil || len(body) > 4096 {
		s.refuse(w, "body of %d bytes (at most 4096)", len(body))
		return
	}
	pt, err := push.Decrypt(body, sb.priv, sb.auth)
	if err != nil {
		s.refuse(w, "%v", err)
		return
	}
	s.mu.Lock()
	if len(sb.status) > 0 {
		code := sb.status[0]
		sb.status = sb.status[1:]
		s.mu.Unlock()
		w.WriteHeader(code)
		return
	}
	m := Message{Sub: name, Payload: pt, TTL: ttl, Urgency: r.Header.Get("Urgency")}
	s.msgs = append(s.msgs, m)
	s.mu.Unlock()
	s.got <- m
	w.WriteHeader(http.StatusCreated)
}
