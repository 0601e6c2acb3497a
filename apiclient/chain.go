package apiclient

// The sealed chain of a session (docs/security.md, "Withheld envelopes"):
// every envelope the machine seals carries, inside the sealed part, its
// running count in the session and the id of the envelope sealed before
// it, so that a device sees when the relay drops, reorders or replays
// one. The machine keeps the chain's end per session in
// keys/<session>.chain, so that a resumed session goes on from it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/ccrelay/ccrelay/protocol"
)

// chainEnd is where a session's chain stands: how many envelopes were
// sealed, and the last one's id.
type chainEnd struct {
	N    int64  `json:"n"`
	Last string `json:"last"`
}

func (k *Keyring) chainPath(session string) string { return k.keyPath(session) + ".chain" }

// chainLocked is session's chain end, read from the state folder the first
// time. Called with mu held.
func (k *Keyring) chainLocked(session string) *chainEnd {
	if c := k.chains[session]; c != nil {
		return c
	}
	c := &chainEnd{}
	if b, err := os.ReadFile(k.chainPath(session)); err == nil {
		if json.Unmarshal(b, c) != nil || c.N < 0 {
			*c = chainEnd{} // unreadable: the device sees a break, not a lie
		}
	}
	k.chains[session] = c
	return c
}

// link appends the chain member to the JSON object plain: the envelope's
// count and the id before it. The chain moves on (ChainSave keeps it).
func (k *Keyring) link(session, id string, plain []byte) []byte {
	k.mu.Lock()
	c := k.chainLocked(session)
	c.N++
	prev := c.Last
	c.Last = id
	n := c.N
	k.mu.Unlock()
	return protocol.AppendChain(plain, n, prev)
}

// ChainMark is where session's chain stands, to go back to with
// ChainRestore when what was sealed is not kept (an outbox write failed).
func (k *Keyring) ChainMark(session string) (int64, string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c := k.chainLocked(session)
	return c.N, c.Last
}

// ChainRestore puts session's chain back where ChainMark found it.
func (k *Keyring) ChainRestore(session string, n int64, last string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	*k.chainLocked(session) = chainEnd{N: n, Last: last}
}

// ChainSave keeps session's chain end in the state folder. It is not
// synced: after a power loss it may be behind, and the devices then see a
// break there.
func (k *Keyring) ChainSave(session string) error {
	if !protocol.IsSessionID(session) {
		return fmt.Errorf("chain: %q is not a session id", session)
	}
	k.mu.Lock()
	c := *k.chainLocked(session)
	k.mu.Unlock()
	b := []byte(`{"n":` + strconv.FormatInt(c.N, 10) + `,"last":` + strconv.Quote(c.Last) + "}\n")
	path := k.chainPath(session)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("chain: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(fmt.Errorf("chain: %w", err), os.Remove(tmp))
	}
	return nil
}
