package apiclient

// Key rotation (docs/security.md, "Key rotation"): when a device this
// machine shared a session's key with is no longer trusted or no longer
// listed by the relay (revoked), the session gets a new key, an epoch,
// wrapped only for the devices that remain. Epoch 0 is the file
// keys/<session>; epoch n is keys/<session>.<n> (32 bytes, 0600, made
// once: the first process to write it wins). keys/<session>.shared says
// which devices the current epoch was wrapped for.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/ccrelay/ccrelay/internal/durable"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/seal"
)

func (k *Keyring) epochPath(session string, epoch int) string {
	return k.keyPath(session) + "." + strconv.Itoa(epoch)
}

// loadLaterLocked reads the session's epochs past those cached. Called
// with mu held.
func (k *Keyring) loadLaterLocked(session string) ([]*seal.SessionKey, error) {
	later := k.later[session]
	for len(later)+1 < seal.MaxEpochs {
		path := k.epochPath(session, len(later)+1)
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("session key: %w", err)
		}
		key, err := seal.SessionKeyFromBytes(b)
		if err != nil {
			return nil, fmt.Errorf("session key %s: %w", path, err)
		}
		later = append(later, key)
	}
	k.later[session] = later
	return later, nil
}

// Keys returns session's keys of every epoch, the first one first, as the
// state folder holds them now.
func (k *Keyring) Keys(session string) ([]*seal.SessionKey, error) {
	first, err := k.SessionKey(session)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	later, err := k.loadLaterLocked(session)
	if err != nil {
		return nil, err
	}
	return append([]*seal.SessionKey{first}, later...), nil
}

// Current returns session's key of its latest epoch, and the epoch, which
// is what everything sealed now is sealed under. The epochs are read from
// the state folder the first time; later ones come from Rotate.
func (k *Keyring) Current(session string) (*seal.SessionKey, int, error) {
	first, err := k.SessionKey(session)
	if err != nil {
		return nil, 0, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	later, loaded := k.later[session]
	if !loaded {
		if later, err = k.loadLaterLocked(session); err != nil {
			return nil, 0, err
		}
	}
	if len(later) == 0 {
		return first, 0, nil
	}
	return later[len(later)-1], len(later), nil
}

// Rotate starts a new epoch of session's key and returns it: what is
// sealed from now on opens only with a key wrapped after this.
func (k *Keyring) Rotate(session string) (int, error) {
	if _, err := k.SessionKey(session); err != nil {
		return 0, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	later, err := k.loadLaterLocked(session)
	if err != nil {
		return 0, err
	}
	epoch := len(later) + 1
	if epoch >= seal.MaxEpochs {
		return 0, fmt.Errorf("rotate the key of session %s: it has %d epochs already, the most a session keeps", session, seal.MaxEpochs)
	}
	fresh, err := seal.NewSessionKey()
	if err != nil {
		return 0, err
	}
	if err := durable.Publish(k.epochPath(session, epoch), fresh.Bytes(), 0o600); err != nil && !errors.Is(err, os.ErrExist) {
		return 0, fmt.Errorf("rotate the key of session %s: %w", session, err)
	}
	// Another process may have made this epoch first: use its key.
	if _, err := k.loadLaterLocked(session); err != nil {
		return 0, err
	}
	return len(k.later[session]), nil
}

// shared is what keys/<session>.shared holds.
type shared struct {
	Epoch   int      `json:"epoch"`
	Devices []string `json:"devices"`
}

// SharedWith returns the devices (credential ids) the session's key of
// epoch was wrapped for, as recorded; none if another epoch was recorded.
func (k *Keyring) SharedWith(session string, epoch int) ([]string, error) {
	if !protocol.IsSessionID(session) {
		return nil, fmt.Errorf("session key: %q is not a session id", session)
	}
	b, err := os.ReadFile(k.keyPath(session) + ".shared")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("shared keys: %w", err)
	}
	var sh shared
	if err := json.Unmarshal(b, &sh); err != nil || sh.Epoch != epoch {
		return nil, nil
	}
	return sh.Devices, nil
}

// RecordShared adds devices to those the session's key of epoch was
// wrapped for.
func (k *Keyring) RecordShared(session string, epoch int, devices []string) error {
	have, err := k.SharedWith(session, epoch)
	if err != nil {
		return err
	}
	all := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(have), devices...))))
	if slices.Equal(all, have) {
		return nil
	}
	b, _ := json.Marshal(shared{Epoch: epoch, Devices: all})
	if err := writeFileDurable(k.keyPath(session)+".shared", b); err != nil {
		return fmt.Errorf("shared keys: %w", err)
	}
	return nil
}
