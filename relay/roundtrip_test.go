package relay

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ccrelay/ccrelay/internal/pgtest"
)

// rtProxy stands between the relay and PostgreSQL (unix sockets) and
// counts round trips: the times a connection's client sends after the
// server last spoke (or first).
type rtProxy struct {
	turns atomic.Int64
}

// startRTProxy proxies the database at pgURL (pgtest's, on a unix socket)
// until the test ends and returns the URL to reach it through the proxy.
func startRTProxy(t *testing.T, pgURL string) (string, *rtProxy) {
	t.Helper()
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	target := filepath.Join(q.Get("host"), ".s.PGSQL.5432")
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, ".s.PGSQL.5432"))
	if err != nil {
		t.Fatal(err)
	}
	p := &rtProxy{}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("unix", target)
			if err != nil {
				c.Close()
				continue
			}
			var mu sync.Mutex
			serverSpoke := true
			copyDir := func(dst, src net.Conn, fromClient bool) {
				defer dst.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := src.Read(buf)
					if n > 0 {
						mu.Lock()
						if fromClient && serverSpoke {
							p.turns.Add(1)
						}
						serverSpoke = !fromClient
						mu.Unlock()
						if _, err := dst.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						if err != io.EOF {
							src.Close()
						}
						return
					}
				}
			}
			wg.Go(func() { copyDir(s, c, true) })
			wg.Go(func() { copyDir(c, s, false) })
		}
	})
	q.Set("host", dir)
	u.RawQuery = q.Encode()
	return u.String(), p
}

// An append of a batch to PostgreSQL is one round trip: the statement that
// numbers and stores it, its blobs and the session's row (ccrelay_append).
// It took eight (begin, session insert, lock, tombstone, insert, update,
// commit, and a blob insert an item).
func TestPostgresAppendOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	proxied, px := startRTProxy(t, pgtest.Start(t).NewDatabase(t))
	s, err := OpenPostgres(ctx, proxied)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The first append prepares its statement on the connection.
	if _, err := s.Append(ctx, sA, items("warm")); err != nil {
		t.Fatal(err)
	}
	const appends = 20
	before := px.turns.Load()
	for i := range appends {
		batch := make([]Item, 100)
		for k := range batch {
			id := fmt.Sprintf("e%d-%d", i, k)
			batch[k] = Item{ID: id, Body: []byte(`{"id":"` + id + `"}`), Blob: []byte("blob")}
		}
		if _, err := s.Append(ctx, sA, batch); err != nil {
			t.Fatal(err)
		}
	}
	// pgx checks a connection idle for over a second with a ping: a
	// loaded machine may add a few (without the function: over 160).
	if got := px.turns.Load() - before; got > 2*appends {
		t.Fatalf("%d round trips for %d appends, want one each", got, appends)
	}
	if last, _ := s.LastSeq(ctx, sA); last != 1+appends*100 {
		t.Fatalf("last seq %d, want %d", last, 1+appends*100)
	}
}

// A relay on PostgreSQL stores a CLI's batch, tells the other nodes and
// learns the session's new row for its listers in one round trip (the
// notice and the row come with the append), where it took three statements
// after the append's own.
func TestPostgresBatchOneRoundTrip(t *testing.T) {
	proxied, px := startRTProxy(t, pgtest.Start(t).NewDatabase(t))
	a := startNode(t, proxied)
	const frames = 100
	before := px.turns.Load()
	floodAcks(t, a.srv.URL, a.srv.URL, 0, frames*100, false, nil)
	// Once for the connection (about 40): the session's claim and
	// announcement, the CLI's presence, the node's own sweeps and pings
	// (more on a loaded machine: a presence refresh every 5 s). Without
	// the function: over 900.
	if got := px.turns.Load() - before; got > 5*frames/2 {
		t.Fatalf("%d round trips for %d batches, want one each", got, frames)
	}
}
