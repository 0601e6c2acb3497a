// Websocket connections: upgrading, tracking them by credential (to close
// them on revocation), compression.

package relay

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
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

// appBufferBytes is the size of each of an app connection's read and write
// buffers. net/http hands a hijacked connection its own (4 KiB each), and
// keeps them as long as the handler runs, which is as long as the
// websocket is open: most app connections are idle, and those 8 KiB were
// a fifth of their cost. A frame larger than the buffer is read into, and
// written from, the frame's own memory without passing through it.
const appBufferBytes = 512

// smallBuffers is a ResponseWriter whose Hijack gives the connection
// buffers of appBufferBytes: it replaces, in place, the bufio.Reader and
// bufio.Writer net/http holds (so their 4 KiB arrays are freed), keeping
// whatever the reader held already (bytes a client sent right after its
// request).
type smallBuffers struct{ http.ResponseWriter }

func (w smallBuffers) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w smallBuffers) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return conn, brw, err
	}
	held := brw.Reader.Buffered()
	var src io.Reader = conn
	if held > 0 {
		b, _ := brw.Reader.Peek(held)
		src = io.MultiReader(bytes.NewReader(bytes.Clone(b)), conn)
	}
	*brw.Reader = *bufio.NewReaderSize(src, max(appBufferBytes, held))
	if held > 0 {
		// Back in the buffer, where the websocket library looks for them
		// (read from the copy: no wait on the connection).
		if _, err := brw.Reader.Peek(held); err != nil {
			conn.Close()
			return nil, nil, fmt.Errorf("keep the bytes read with the request: %w", err)
		}
	}
	*brw.Writer = *bufio.NewWriterSize(conn, appBufferBytes)
	return conn, brw, nil
}
