// Websocket connections: upgrading, tracking them by credential (to close
// them on revocation), compression.

package relay

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/coder/websocket"
)

// upgrade accepts a websocket and counts it as open until done is called.
// Until then the relay pings it (keepAlive).
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request, mode websocket.CompressionMode) (*websocket.Conn, func(), error) {
	s.conns.Add(1)
	c, err := s.accept(w, r, mode)
	if err != nil {
		s.conns.Done()
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(r.Context())
	stopPings := s.keepAlive(ctx, c, r.RemoteAddr, r.URL.Path)
	lc := s.track(principalFrom(r.Context()).cred.ID, c)
	return c, func() {
		s.forget(lc)
		cancel()
		stopPings()
		c.CloseNow()
		lc.closing.Wait()
		s.conns.Done()
	}, nil
}

// liveConn is an open websocket of a credential, which revoking closes.
type liveConn struct {
	id      string
	c       *websocket.Conn
	closing sync.WaitGroup // the closing handshake started by a revocation
	revoked bool           // under Server.liveMu
	gone    bool           // under Server.liveMu: the connection ended
}

// track remembers c as an open websocket of the credential id (none for a
// bootstrap token), for closeCredential to close.
func (s *Server) track(id string, c *websocket.Conn) *liveConn {
	lc := &liveConn{id: id, c: c}
	if id == "" {
		return lc
	}
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if s.live[id] == nil {
		s.live[id] = map[*liveConn]struct{}{}
	}
	s.live[id][lc] = struct{}{}
	return lc
}

// forget: lc's connection ended; no closing handshake starts after this.
func (s *Server) forget(lc *liveConn) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	lc.gone = true
	delete(s.live[lc.id], lc)
	if len(s.live[lc.id]) == 0 {
		delete(s.live, lc.id)
	}
}

// StatusRevoked is the close code of a websocket whose credential was
// revoked (or signed out): its holder must not reconnect with it.
const StatusRevoked websocket.StatusCode = 4001

// closeCredential starts closing every open websocket of credential id,
// telling the peer why (StatusRevoked), and returns how many. Each
// closing handshake belongs to its connection, which waits for it to end
// (the library bounds it to 5 s) before it counts as closed.
func (s *Server) closeCredential(id, why string) int {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	n := 0
	for lc := range s.live[id] {
		if lc.gone || lc.revoked {
			continue
		}
		lc.revoked = true
		n++
		lc.closing.Go(func() { lc.c.Close(StatusRevoked, why) })
	}
	return n
}

// appCompression: apps (browsers, which always offer permessage-deflate)
// get compressed frames. Session JSON shrinks several times over, which
// makes a long history arrive much sooner on a phone's network (and even on
// loopback, in Chromium). CLIs do not ask for it and pay nothing.
//
// Each frame is compressed on its own (no context takeover): a connection
// that kept its compression context would hold a 1.2 MB compressor for as
// long as it is open, idle or not (TestIdleAppMemory); this way the
// compressor comes from a pool for one frame and goes back. History
// batches are large enough to compress well alone.
const appCompression = websocket.CompressionNoContextTakeover

func (s *Server) accept(w http.ResponseWriter, r *http.Request, mode websocket.CompressionMode) (*websocket.Conn, error) {
	opts := &websocket.AcceptOptions{CompressionMode: mode}
	if s.fromProxy(r) { // the Origin was checked against the forwarded host (transport)
		opts.OriginPatterns = []string{s.requestHost(r)}
	}
	for _, p := range websocketProtocols(r) {
		if strings.HasPrefix(p, tokenProtocolPrefix) {
			opts.Subprotocols = []string{p} // echo it, or browsers close
		}
	}
	c, err := websocket.Accept(w, r, opts)
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(MaxFrameBytes)
	return c, nil
}
