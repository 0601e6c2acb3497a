package apiclient

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/seal"
)

// TestSealedChain: each sealed envelope carries, sealed, its count in the
// session and the id of the one before; a failed outbox write takes its
// links back; a session resumed by another process (a new keyring on the
// same state folder) goes on from where the chain stood; an envelope
// sealed before chains opens as it did.
func TestSealedChain(t *testing.T) {
	state := t.TempDir()
	machine, _ := ecdh.X25519().GenerateKey(rand.Reader)
	kr, _ := OpenKeyring(state, machine)
	kr.Trust(TrustedDevice{ID: "d1", Name: "phone", PublicKey: make([]byte, 32)})
	dir := t.TempDir()
	box, err := OpenOutboxWith(dir, OutboxOptions{Sealer: kr})
	if err != nil {
		t.Fatal(err)
	}
	all := envs(sessA, 0, 6)
	ctx := context.Background()
	if err := box.Append(ctx, sessA, all[:2]); err != nil {
		t.Fatal(err)
	}
	// A write that fails: its envelopes come again later, linked as if it
	// had not been.
	box.log = failingLog{box.log}
	if err := box.Append(ctx, sessA, all[2:3]); err == nil {
		t.Fatal("a failing write succeeded")
	}
	box.log = box.log.(failingLog).LogFile
	if err := box.Append(ctx, sessA, all[2:4]); err != nil {
		t.Fatal(err)
	}
	box.Close()
	// Resumed by another process.
	kr2, _ := OpenKeyring(state, machine)
	box2, err := OpenOutboxWith(dir, OutboxOptions{Sealer: kr2})
	if err != nil {
		t.Fatal(err)
	}
	defer box2.Close()
	if err := box2.Append(ctx, sessA, all[4:]); err != nil {
		t.Fatal(err)
	}
	key, _ := kr2.SessionKey(sessA)
	b, err := box2.next(100, 1<<20)
	if err != nil || b == nil || len(b.envelopes) != len(all) {
		t.Fatalf("outbox batch: %v %v", b, err)
	}
	for i, raw := range b.envelopes {
		h, err := protocol.DecodeSealed(raw)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := key.Open(seal.AD{Session: sessA, ID: h.ID, Direction: seal.FromMachine}, h.Sealed)
		if err != nil {
			t.Fatal(err)
		}
		env, c, ok := protocol.SplitChain(plain)
		prev := ""
		if i > 0 {
			prev = all[i-1].ID
		}
		if !ok || c != (protocol.Chain{N: int64(i + 1), Prev: prev}) {
			t.Errorf("envelope %d: chain %+v %v, want %d after %q", i, c, ok, i+1, prev)
		}
		if want, _ := all[i].AppendJSON(nil); string(env) != string(want) {
			t.Errorf("envelope %d opens to %s, want %s", i, env, want)
		}
	}
	// Split of an envelope without a chain, and of one whose content has
	// a "chain" of its own.
	plain := []byte(`{"id":"a","ev":{"t":"text","chain":{"n":9}}}`)
	if env, _, ok := protocol.SplitChain(plain); ok || string(env) != string(plain) {
		t.Errorf("an envelope without a chain: %s %v", env, ok)
	}
	linked := protocol.AppendChain(plain, 3, "x")
	if env, c, ok := protocol.SplitChain(linked); !ok || string(env) != string(plain) || c != (protocol.Chain{N: 3, Prev: "x"}) {
		t.Errorf("split %s: %s %+v %v", linked, env, c, ok)
	}
}

// failingLog is a LogFile whose writes fail.
type failingLog struct{ LogFile }

func (failingLog) WriteAt([]byte, int64) (int, error) { return 0, errors.New("disk full") }

// TestSealedSummaryCarriesChainEnd: a sealed announcement carries where
// the session's chain stood when the outbox last kept what was sealed
// (count and last id), so that a device sees envelopes withheld at the
// end; none before the first envelope; a write that failed does not move
// it; a resumed process announces where the last one left it.
func TestSealedSummaryCarriesChainEnd(t *testing.T) {
	state := t.TempDir()
	machine, _ := ecdh.X25519().GenerateKey(rand.Reader)
	kr, _ := OpenKeyring(state, machine)
	kr.Trust(TrustedDevice{ID: "d1", Name: "phone", PublicKey: make([]byte, 32)})
	box, err := OpenOutboxWith(t.TempDir(), OutboxOptions{Sealer: kr})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	info := json.RawMessage(`{"mode":"remote","status":"idle","title":"t"}`)
	summary := func(kr *Keyring) map[string]json.RawMessage {
		t.Helper()
		out, err := kr.SealInfo(sessA, info)
		if err != nil {
			t.Fatal(err)
		}
		var a struct{ Sealed string }
		json.Unmarshal(out, &a)
		key, _ := kr.SessionKey(sessA)
		plain, err := key.Open(seal.AD{Session: sessA, ID: "announce", Direction: seal.FromMachine}, a.Sealed)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(plain, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	end := func(m map[string]json.RawMessage) protocol.ChainEnd {
		var c protocol.ChainEnd
		json.Unmarshal(m["chainEnd"], &c)
		return c
	}
	if m := summary(kr); m["chainEnd"] != nil || string(m["title"]) != `"t"` {
		t.Errorf("before any envelope: %v", m)
	}
	all := envs(sessA, 0, 5)
	ctx := context.Background()
	if err := box.Append(ctx, sessA, all[:3]); err != nil {
		t.Fatal(err)
	}
	if got, want := end(summary(kr)), (protocol.ChainEnd{N: 3, Last: all[2].ID}); got != want {
		t.Errorf("after 3: %+v, want %+v", got, want)
	}
	box.log = failingLog{box.log}
	if err := box.Append(ctx, sessA, all[3:4]); err == nil {
		t.Fatal("a failing write succeeded")
	}
	box.log = box.log.(failingLog).LogFile
	if got, want := end(summary(kr)), (protocol.ChainEnd{N: 3, Last: all[2].ID}); got != want {
		t.Errorf("after a failed write: %+v, want %+v", got, want)
	}
	if err := box.Append(ctx, sessA, all[3:]); err != nil {
		t.Fatal(err)
	}
	kr2, _ := OpenKeyring(state, machine)
	if got, want := end(summary(kr2)), (protocol.ChainEnd{N: 5, Last: all[4].ID}); got != want {
		t.Errorf("resumed: %+v, want %+v", got, want)
	}
}
