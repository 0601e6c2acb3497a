// Authentication: who a request is (a bootstrap token, a machine, a device)
// and which endpoints each may use.

package relay

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// OwnerID is the id under which a token's sessions were stored before
// accounts (a hash, so the database does not hold the token); a further
// token of the token file is still the account of that id.
func OwnerID(token string) string {
	sum := sha256.Sum256([]byte("ccrelay-owner:" + token))
	return hex.EncodeToString(sum[:8])
}

type ownerKey struct{}

// ownerFrom is the account of the request: the owner of the sessions it
// may see and steer.
func ownerFrom(ctx context.Context) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}

// principal is who made a request: an account and a role, and for a
// machine or a device its credential.
type principal struct {
	account string
	role    string
	cred    Credential // zero for a bootstrap token
}

type principalKey struct{}

func principalFrom(ctx context.Context) principal {
	p, _ := ctx.Value(principalKey{}).(principal)
	return p
}

// only admits the roles given (and bootstrap tokens) to next; others get
// 403 with what their role may do.
func (s *Server) only(next http.Handler, roles ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principalFrom(r.Context())
		if p.role == RoleBootstrap || slices.Contains(roles, p.role) {
			next.ServeHTTP(w, r)
			return
		}
		s.log.Warn("role refused", "addr", s.clientAddr(r), "endpoint", endpointName(r.URL.Path), "role", p.role, "name", p.cred.Name)
		msg := "a " + p.role + " credential may not use " + endpointName(r.URL.Path)
		switch p.role {
		case RoleDevice:
			msg += ": a device (an app) reads and sends commands; only a machine (a CLI) writes envelopes"
		case RoleMachine:
			msg += ": a machine (a CLI) writes envelopes; only a device (an app) reads sessions and sends commands"
		}
		http.Error(w, msg, http.StatusForbidden)
	})
}

// auth refuses, before any handler runs, a request without a credential in
// the Authorization header or (websockets from a browser) the token
// subprotocol. Each refusal is logged (address and endpoint, never what was
// offered as a credential); an address with LoginFailures refusals in a
// LoginWindow is answered 429, without its credential being looked at,
// until the window ends.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := s.Limits.withDefaults()
		key, now := addrKey(s.clientAddr(r)), s.now()
		if until, blocked := s.logins.blocked(key, now, l); blocked {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(until.Sub(now).Seconds()))))
			http.Error(w, "too many failed logins from this address; try again later", http.StatusTooManyRequests)
			return
		}
		p, reason, err := s.authorized(r)
		if err != nil {
			s.log.Error("login", "addr", s.clientAddr(r), "err", err)
			http.Error(w, "the relay could not check the credential", http.StatusInternalServerError)
			return
		}
		if reason != "" {
			n := s.logins.failed(key, now, l)
			args := []any{"addr", s.clientAddr(r), "endpoint", endpointName(r.URL.Path), "reason", reason, "failures", n}
			if n >= l.LoginFailures {
				s.log.Warn("login failed; further logins from this address refused", append(args, "for", l.LoginWindow)...)
			} else {
				s.log.Warn("login failed", args...)
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="ccrelay"`)
			msg := "unauthorized"
			if reason == reasonRemoteBootstrap {
				msg = "unauthorized: the relay's token works only on this machine (127.0.0.1); pair this device (ccrelay pair) or log this machine in (ccrelay login)"
			}
			http.Error(w, msg, http.StatusUnauthorized)
			return
		}
		if p.cred.ID != "" {
			s.touch(r.Context(), p.cred, s.clientAddr(r))
		}
		ctx := context.WithValue(r.Context(), ownerKey{}, p.account)
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, principalKey{}, p)))
	})
}

const reasonRemoteBootstrap = "relay token from another machine"

// authorized finds who offered the request's credential (header or
// subprotocol): a machine or a device by its hash in the store, or a
// bootstrap token (compared in constant time). It returns why not
// ("" when found) without saying what was offered.
func (s *Server) authorized(r *http.Request) (principal, string, error) {
	candidates := []string{strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")}
	for _, p := range websocketProtocols(r) {
		if t, ok := strings.CutPrefix(p, tokenProtocolPrefix); ok {
			candidates = append(candidates, t)
		}
	}
	reason := "no token"
	for _, c := range candidates {
		if c == "" {
			continue
		}
		reason = "unknown token"
		if strings.HasPrefix(c, credentialPrefix) {
			cred, err := s.store.CredentialBySecret(r.Context(), c)
			if errors.Is(err, ErrNoCredential) {
				continue
			}
			if err != nil {
				return principal{}, "", err
			}
			return principal{account: cred.Account, role: cred.Role, cred: cred}, "", nil
		}
		account, found := "", false
		for t, a := range s.tokens {
			if subtle.ConstantTimeCompare([]byte(c), []byte(t)) == 1 {
				account, found = a, true
			}
		}
		if found {
			if !s.directLoopback(r) {
				return principal{}, reasonRemoteBootstrap, nil
			}
			return principal{account: account, role: RoleBootstrap}, "", nil
		}
	}
	return principal{}, reason, nil
}

// touch records a credential's last use, at most every lastSeenEvery (and
// when its address changes).
func (s *Server) touch(ctx context.Context, c Credential, addr string) {
	now := s.now()
	s.touchMu.Lock()
	last, ok := s.touched[c.ID]
	fresh := ok && last.addr == addr && now.Sub(last.at) < lastSeenEvery
	if !fresh {
		s.touched[c.ID] = touch{at: now, addr: addr}
	}
	s.touchMu.Unlock()
	if fresh {
		return
	}
	if err := s.store.TouchCredential(ctx, c.ID, addr, now); err != nil {
		s.log.Warn("last seen", "err", err)
	}
}

type touch struct {
	at   time.Time
	addr string
}

// endpointName is the path of a refused request as logged: one of the
// relay's endpoints, or "other" (a path is the client's to choose, and
// could hold anything).
func endpointName(path string) string {
	switch path {
	case "/health", "/ws/cli", "/ws/app":
		return path
	}
	return "other"
}

func websocketProtocols(r *http.Request) []string {
	var out []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			out = append(out, strings.TrimSpace(p))
		}
	}
	return out
}
