package apiclient

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/ccrelay/ccrelay/protocol"
)

// A session's key goes only to the relays the session was sent to: each
// session's key file has beside it keys/<session>.relays, the relays
// (RelayIdentity) that got its envelopes or announcements. A device trusted
// later gets, from a relay, the keys of that relay's sessions only, so that
// the keys of sessions sent to another relay (which would make sessions
// there) never reach it. A session whose key has no such file (kept by an
// older ccrelay) gets its keys sent again when it is sent again.

// relaysSuffix names the file of a session's relays.
const relaysSuffix = ".relays"

// sessionRelays caches what the keyring read of the .relays files.
type sessionRelays struct {
	mu   sync.Mutex
	sent map[string][]string // session -> relays
}

func (k *Keyring) relaysPath(session string) string {
	return filepath.Join(k.dir, SessionKeysDir, session+relaysSuffix)
}

// relaysOf reads the relays session was sent to.
func (k *Keyring) relaysOf(session string) ([]string, error) {
	k.relays.mu.Lock()
	defer k.relays.mu.Unlock()
	if r, ok := k.relays.sent[session]; ok {
		return r, nil
	}
	b, err := os.ReadFile(k.relaysPath(session))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("session relays: %w", err)
	}
	r := strings.Fields(string(b))
	if k.relays.sent == nil {
		k.relays.sent = map[string][]string{}
	}
	k.relays.sent[session] = r
	return r, nil
}

// MarkRelay records that session is sent to relay (a URL).
func (k *Keyring) MarkRelay(session, relay string) error {
	if !protocol.IsSessionID(session) {
		return fmt.Errorf("session relays: %q is not a session id", session)
	}
	relay = RelayIdentity(relay)
	have, err := k.relaysOf(session)
	if err != nil {
		return err
	}
	if slices.Contains(have, relay) {
		return nil
	}
	k.relays.mu.Lock()
	defer k.relays.mu.Unlock()
	f, err := os.OpenFile(k.relaysPath(session), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("session relays: %w", err)
	}
	_, err = f.WriteString(relay + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("session relays: %w", err)
	}
	k.relays.sent[session] = append(slices.Clip(have), relay)
	return nil
}

// SentTo reports whether session was sent to relay (a URL).
func (k *Keyring) SentTo(session, relay string) (bool, error) {
	have, err := k.relaysOf(session)
	return slices.Contains(have, RelayIdentity(relay)), err
}
