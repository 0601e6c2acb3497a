package apiclient

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/seal"
)

// An outbox's envelopes belong to the relay they were recorded for. What
// one relay never received waits while another relay is named (that relay
// gets only its own envelopes, and the outbox says what waits for whom),
// and goes to its relay once that relay is named again; the same for a
// leftover outbox taken over with Adopt.
func TestOutboxEnvelopesStayWithTheirRelay(t *testing.T) {
	a, b := newRelay(t), newRelay(t)
	urlA, urlB := "http://"+a.addr, "http://"+b.addr
	dir := t.TempDir()
	const s1, s2, s3 = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222", "33333333-3333-4333-8333-333333333333"

	// Recorded for A, never sent.
	box, err := OpenOutboxWith(dir, OutboxOptions{Relay: urlA})
	if err != nil {
		t.Fatal(err)
	}
	forA := envs(s1, 0, 5)
	if err := box.Append(t.Context(), s1, forA); err != nil {
		t.Fatal(err)
	}
	box.Close()
	// A leftover outbox of another run, also for A.
	left := filepath.Join(t.TempDir(), "outbox")
	lbox, err := OpenOutboxWith(left, OutboxOptions{Relay: urlA + "/"})
	if err != nil {
		t.Fatal(err)
	}
	leftA := envs(s3, 0, 3)
	lbox.Append(t.Context(), s3, leftA)
	lbox.Close()

	// A run against B sends B only its own.
	box, err = OpenOutboxWith(dir, OutboxOptions{Relay: urlB})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := box.Adopt(left); err != nil || n != 0 {
		t.Fatalf("adopt a leftover of another relay: %d %v", n, err)
	}
	if p := box.Pending(); p != 0 {
		t.Fatalf("%d envelopes of another relay are pending for B", p)
	}
	if h := box.Held(); len(h) != 1 || h[0].Relay != RelayIdentity(urlA) || h[0].Envelopes != 8 {
		t.Fatalf("held: %+v, want 8 for %s", h, RelayIdentity(urlA))
	}
	forB := envs(s2, 0, 4)
	if err := box.Append(t.Context(), s2, forB); err != nil {
		t.Fatal(err)
	}
	run := runClient(Config{URL: urlB, Token: token}, box)
	run.finish(t)
	box.Close()
	checkStored(t, s2, b.ids(s2), forB)
	if got := b.ids(s1); len(got) != 0 {
		t.Fatalf("relay B got %d envelopes recorded for relay A", len(got))
	}
	if got := b.ids(s3); len(got) != 0 {
		t.Fatalf("relay B got %d envelopes of a leftover outbox recorded for relay A", len(got))
	}

	// Named again, A gets what waited for it.
	box, err = OpenOutboxWith(dir, OutboxOptions{Relay: urlA})
	if err != nil {
		t.Fatal(err)
	}
	if h := box.Held(); len(h) != 0 {
		t.Fatalf("still held: %+v", h)
	}
	run = runClient(Config{URL: urlA, Token: token}, box)
	run.finish(t)
	box.Close()
	checkStored(t, s1, a.ids(s1), forA)
	checkStored(t, s3, a.ids(s3), leftA)
	if got := a.ids(s2); len(got) != 0 {
		t.Fatalf("relay A got %d envelopes of relay B", len(got))
	}
}

func TestRelayIdentity(t *testing.T) {
	for in, want := range map[string]string{
		"https://Relay.Example:443/":    "https://relay.example",
		"https://relay.example":         "https://relay.example",
		"http://127.0.0.1:8707":         "http://127.0.0.1:8707",
		"http://127.0.0.1:80/":          "http://127.0.0.1",
		"https://relay.example/sub/":    "https://relay.example/sub",
		"https://relay.example:8443/x/": "https://relay.example:8443/x",
	} {
		if got := RelayIdentity(in); got != want {
			t.Errorf("RelayIdentity(%q) = %q, want %q", in, got, want)
		}
	}
}

// A device trusted later gets, from a relay, the keys of that relay's
// sessions only: the machine's sessions sent to another relay get no keys
// there (which made sessions of theirs there, with nothing in them).
func TestNewlyTrustedDeviceGetsKeysOfThisRelayOnly(t *testing.T) {
	a, b := newRelay(t), newRelay(t)
	phone, _ := seal.GenerateKeyPair()
	machine, _ := ecdh.X25519().GenerateKey(rand.Reader)
	kr, _ := OpenKeyring(t.TempDir(), machine)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	send := func(r *relayProc, session string) *running {
		box, err := OpenOutboxWith(t.TempDir(), OutboxOptions{Sealer: kr, Relay: "http://" + r.addr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { box.Close() })
		box.Append(ctx, session, envs(session, 0, 2))
		rc := runClient(Config{URL: "http://" + r.addr, Token: token, Keyring: kr, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, box)
		if err := rc.cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		return rc
	}
	idA := pairTestDevice(t, a, "phone", phone.Public().Bytes())
	kr.Trust(TrustedDevice{ID: idA, Name: "phone", PublicKey: phone.Public().Bytes()})
	send(a, sessA).finish(t)

	// The phone pairs through relay B too; a run there sends sessB.
	idB := pairTestDevice(t, b, "phone", phone.Public().Bytes())
	kr.Trust(TrustedDevice{ID: idB, Name: "phone", PublicKey: phone.Public().Bytes()})
	rc := send(b, sessB)
	// Until the client went through every session it has a key for.
	stamp, _ := kr.TrustedStamp()
	for {
		rc.cl.mu.Lock()
		done := rc.cl.trustStamp == stamp
		rc.cl.mu.Unlock()
		if done {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the client never synced the keys")
		}
		time.Sleep(10 * time.Millisecond)
	}
	rc.finish(t)
	if _, _, err := b.st.SessionKeyFor(ctx, sessB, idB); err != nil {
		t.Fatalf("relay B has no key of its own session: %v", err)
	}
	if w, _, err := b.st.SessionKeyFor(ctx, sessA, idB); err == nil {
		t.Fatalf("relay B got the key of a session sent to relay A: %.20s…", w)
	}
	if _, _, err := a.st.SessionKeyFor(ctx, sessA, idA); err != nil {
		t.Fatalf("relay A lost its key: %v", err)
	}
}
