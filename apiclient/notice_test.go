package apiclient

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// waitLog polls (with a deadline) until the log holds n occurrences of s.
func waitLog(t *testing.T, l *logRecords, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(l.String(), s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %d× %q; log:\n%s", n, s, l.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// The user hears at once, and once per outage, that the relay cannot be
// reached and why, and that sending is retried; once that it is reached
// again; and that a token was refused.
func TestClientSaysWhenRelayUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	box, err := OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	ctx := context.Background()
	all := envs(sessN, 0, 20)
	box.Append(ctx, sessN, all[:10])
	var notices, logs logRecords
	cl := NewClient(Config{URL: "http://" + addr, Token: token, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		Logger: logs.logger(), Notice: &notices}, box)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); cl.Run(rctx) }()
	defer func() { cancel(); <-done }()

	waitLog(t, &logs, "reconnecting", 5) // several retries
	got := notices.String()
	if strings.Count(got, "\n") != 1 || !strings.Contains(got, "cannot reach the relay at http://"+addr) ||
		!strings.Contains(got, "connection refused") || !strings.Contains(got, "retrying") {
		t.Fatalf("after 5 failed attempts the user heard:\n%s", got)
	}

	// The relay comes up: said once, and everything is sent.
	r := &relayProc{t: t, addr: addr, db: filepath.Join(t.TempDir(), "relay.db")}
	r.start()
	t.Cleanup(r.halt)
	waitLog(t, &notices, "reached the relay", 1)
	box.Append(ctx, sessN, all[10:])
	fctx, fcancel := context.WithTimeout(ctx, 20*time.Second)
	defer fcancel()
	if err := cl.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	// A second outage is said again, once.
	r.halt()
	before := strings.Count(logs.String(), "reconnecting")
	waitLog(t, &logs, "reconnecting", before+5)
	if got := notices.String(); strings.Count(got, "cannot reach") != 2 || strings.Count(got, "reached the relay") != 1 {
		t.Fatalf("after a second outage the user heard:\n%s", got)
	}
	r.start()
	waitLog(t, &notices, "reached the relay", 2)
	cancel()
	<-done
	r.halt()
	checkStored(t, sessN, r.ids(sessN), all)

	// A refused token is said at once, as such.
	notices = logRecords{}
	r.start()
	bad := NewClient(Config{URL: "http://" + addr, Token: "wrong", Logger: quiet, Notice: &notices}, box)
	if err := bad.Run(ctx); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Run = %v", err)
	}
	if got := notices.String(); !strings.Contains(got, "refused the token") || strings.Contains(got, "cannot reach") {
		t.Fatalf("a refused token was told as:\n%s", got)
	}
}
