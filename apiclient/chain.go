package apiclient

// The sealed chain of a session (docs/security.md, "Withheld envelopes"):
// every envelope the machine seals carries, inside the sealed part, its
// running count in the session and the id of the envelope sealed before
// it, so that a device sees when the relay drops, reorders or replays
// one. The machine keeps the chain's end per session in
// keys/<session>.chain, so that a resumed session goes on from it.

import (
	"bytes"
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
	k.kept[session] = *c
	return c
}

// keptChain is where session's chain stood when the outbox last kept what
// was sealed (ChainSave): the envelopes it counts were all written before
// it, so an announcement made now reaches the relay after every one of
// them (the client sends announcements once the outbox before them is
// through). The session's sealed summary carries it, so that a device
// sees envelopes withheld at the end, where no later envelope names them.
func (k *Keyring) keptChain(session string) chainEnd {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.chainLocked(session)
	return k.kept[session]
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

// ChainSave keeps session's chain end in the state folder, written in
// place (a rename over the file would make some file systems flush it at
// once, as costly as the outbox's own sync) and padded to one size, so
// that each write replaces the whole of the last one. It is not synced:
// after a power loss it may be behind, and the devices then see a break
// there.
func (k *Keyring) ChainSave(session string) error {
	if !protocol.IsSessionID(session) {
		return fmt.Errorf("chain: %q is not a session id", session)
	}
	k.mu.Lock()
	c := *k.chainLocked(session)
	k.kept[session] = c
	k.mu.Unlock()
	b := []byte(`{"n":` + strconv.FormatInt(c.N, 10) + `,"last":` + strconv.Quote(c.Last) + "}")
	if len(b) < chainFileSize {
		b = append(b, bytes.Repeat([]byte(" "), chainFileSize-1-len(b))...)
		b = append(b, '\n')
	}
	f, err := os.OpenFile(k.chainPath(session), os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("chain: %w", err)
	}
	_, err = f.WriteAt(b, 0)
	if err == nil && len(b) != chainFileSize {
		err = f.Truncate(int64(len(b))) // an id that needs more room (escapes)
	}
	return errors.Join(err, f.Close())
}

// chainFileSize is the size every chain file is written at: room for the
// count and a quoted id of the longest a sealed envelope has
// (seal.MaxADFieldBytes, 255 bytes) with a few escapes.
const chainFileSize = 640
