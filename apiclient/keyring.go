package apiclient

// The machine's side of end-to-end encryption (docs/security.md, "Wiring:
// how sealed content travels"): its key pair, the devices it trusts, and
// one key per session, all in its state folder.

import (
	"crypto/ecdh"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/ccrelay/ccrelay/internal/durable"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/seal"
)

// Files of the keyring in the state folder.
const (
	TrustedDevicesFile = "devices.json" // the devices this machine trusts (0600)
	SessionKeysDir     = "keys"         // one file per session: its 32-byte key (0600)
)

// MaxTrustedDevices bounds the devices a machine trusts (the relay's
// MaxCredentials per account).
const MaxTrustedDevices = 256

// TrustedDevice is a device whose key this machine confirmed at pairing.
type TrustedDevice struct {
	ID        string `json:"id"` // its credential id on the relay
	Name      string `json:"name"`
	PublicKey []byte `json:"publicKey"` // X25519, 32 bytes
	Added     int64  `json:"added"`     // ms since the epoch
}

// Keyring holds the machine's end-to-end state. Its methods are safe for
// concurrent use, and for use by several processes at once: trusted
// devices are read again when the file changes, and a session's key is
// made once (the first process to write it wins; the others read it).
type Keyring struct {
	dir     string
	machine *seal.KeyPair

	mu      sync.Mutex
	keys    map[string]*seal.SessionKey
	later   map[string][]*seal.SessionKey // session -> its keys of epoch 1 and on (rotation.go)
	chains  map[string]*chainEnd          // session -> where its sealed chain stands (chain.go)
	kept    map[string]chainEnd           // session -> its chain's end as last kept with the outbox (chain.go)
	trusted []TrustedDevice
	modTime time.Time
	size    int64

	relays sessionRelays // the relays each session was sent to (keyrelay.go)
}

// OpenKeyring opens the keyring in the state folder dir for the machine's
// key pair.
func OpenKeyring(dir string, machine *ecdh.PrivateKey) (*Keyring, error) {
	kp, err := seal.NewKeyPair(machine)
	if err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, SessionKeysDir), 0o700); err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	return &Keyring{dir: dir, machine: kp, keys: map[string]*seal.SessionKey{}, later: map[string][]*seal.SessionKey{}, chains: map[string]*chainEnd{}, kept: map[string]chainEnd{}}, nil
}

// Machine is the machine's key pair.
func (k *Keyring) Machine() *seal.KeyPair { return k.machine }

// MachinePublic is the machine's public key as the wire carries it.
func (k *Keyring) MachinePublic() string {
	return base64.RawURLEncoding.EncodeToString(k.machine.Public().Bytes())
}

// Trusted returns the devices the machine trusts, as the file says now.
func (k *Keyring) Trusted() ([]TrustedDevice, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.trustedLocked()
}

func (k *Keyring) trustedLocked() ([]TrustedDevice, error) {
	path := filepath.Join(k.dir, TrustedDevicesFile)
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		k.trusted, k.modTime, k.size = nil, time.Time{}, 0
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("trusted devices: %w", err)
	}
	if st.ModTime().Equal(k.modTime) && st.Size() == k.size {
		return slices.Clone(k.trusted), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("trusted devices: %w", err)
	}
	var list []TrustedDevice
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("trusted devices %s: %w", path, err)
	}
	list = slices.DeleteFunc(list, func(d TrustedDevice) bool { return len(d.PublicKey) != 32 || d.ID == "" })
	k.trusted, k.modTime, k.size = list, st.ModTime(), st.Size()
	return slices.Clone(list), nil
}

// TrustedStamp changes when the trusted devices file does.
func (k *Keyring) TrustedStamp() (string, error) {
	st, err := os.Stat(filepath.Join(k.dir, TrustedDevicesFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("trusted devices: %w", err)
	}
	return fmt.Sprint(st.ModTime().UnixNano(), st.Size()), nil
}

// Trust adds d to the trusted devices (replacing one of the same id).
func (k *Keyring) Trust(d TrustedDevice) error {
	if len(d.PublicKey) != 32 || d.ID == "" {
		return errors.New("trust: a device needs an id and a 32-byte public key")
	}
	d.Name = protocol.CleanName(d.Name, 0) // as the relay passed it on
	k.mu.Lock()
	defer k.mu.Unlock()
	list, err := k.trustedLocked()
	if err != nil {
		return err
	}
	list = slices.DeleteFunc(list, func(x TrustedDevice) bool { return x.ID == d.ID })
	if len(list) >= MaxTrustedDevices {
		return fmt.Errorf("trust: this machine trusts %d devices already; revoke some first", len(list))
	}
	list = append(list, d)
	b, _ := json.MarshalIndent(list, "", "  ")
	if err := writeFileDurable(filepath.Join(k.dir, TrustedDevicesFile), b); err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	k.modTime = time.Time{} // read again
	return nil
}

// UntrustDevice removes the device of credential id from the trusted
// devices in the state folder dir, and reports whether it was there. A
// running ccrelay sees the file change: the sessions it sends get new
// keys, wrapped only for the devices that remain (keys.go).
func UntrustDevice(dir, id string) (bool, error) {
	path := filepath.Join(dir, TrustedDevicesFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("untrust: %w", err)
	}
	var list []TrustedDevice
	if err := json.Unmarshal(b, &list); err != nil {
		return false, fmt.Errorf("untrust: trusted devices %s: %w", path, err)
	}
	n := len(list)
	list = slices.DeleteFunc(list, func(d TrustedDevice) bool { return d.ID == id })
	if len(list) == n {
		return false, nil
	}
	b, _ = json.MarshalIndent(list, "", "  ")
	if err := writeFileDurable(path, b); err != nil {
		return false, fmt.Errorf("untrust: %w", err)
	}
	return true, nil
}

// Sealing reports whether session's envelopes are sealed: once it has a
// key, always; otherwise when the machine trusts a device.
func (k *Keyring) Sealing(session string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys[session] != nil {
		return true
	}
	if _, err := os.Stat(k.keyPath(session)); err == nil {
		return true
	}
	list, err := k.trustedLocked()
	return err == nil && len(list) > 0
}

func (k *Keyring) keyPath(session string) string {
	return filepath.Join(k.dir, SessionKeysDir, session)
}

// SessionKey returns session's key, made and saved (0600) the first time.
func (k *Keyring) SessionKey(session string) (*seal.SessionKey, error) {
	if !protocol.IsSessionID(session) {
		return nil, fmt.Errorf("session key: %q is not a session id", session)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if key := k.keys[session]; key != nil {
		return key, nil
	}
	path := k.keyPath(session)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		fresh := make([]byte, seal.KeySize)
		rand.Read(fresh)
		if err := durable.Publish(path, fresh, 0o600); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("session key: %w", err)
		}
		b, err = os.ReadFile(path) // another process may have won
	}
	if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	key, err := seal.SessionKeyFromBytes(b)
	if err != nil {
		return nil, fmt.Errorf("session key %s: %w", path, err)
	}
	k.keys[session] = key
	return key, nil
}

// existingKey is session's key if this machine made one; a command for a
// session it has no key of makes none (the relay names the session).
func (k *Keyring) existingKey(session string) (*seal.SessionKey, error) {
	if !protocol.IsSessionID(session) {
		return nil, fmt.Errorf("session key: %q is not a session id", session)
	}
	k.mu.Lock()
	_, loaded := k.keys[session]
	k.mu.Unlock()
	if !loaded {
		if _, err := os.Stat(k.keyPath(session)); err != nil {
			return nil, fmt.Errorf("no key of session %s on this machine", session)
		}
	}
	return k.SessionKey(session)
}

// Sessions lists the sessions this machine has keys for.
func (k *Keyring) Sessions() ([]string, error) {
	es, err := os.ReadDir(filepath.Join(k.dir, SessionKeysDir))
	if err != nil {
		return nil, fmt.Errorf("session keys: %w", err)
	}
	var out []string
	for _, e := range es {
		if protocol.IsSessionID(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Wrap wraps session's keys, of every epoch, for a trusted device.
func (k *Keyring) Wrap(session string, d TrustedDevice) (string, error) {
	keys, err := k.Keys(session)
	if err != nil {
		return "", err
	}
	pub, err := ecdh.X25519().NewPublicKey(d.PublicKey)
	if err != nil {
		return "", fmt.Errorf("wrap for %s: %w", d.Name, err)
	}
	return seal.WrapKeys(k.machine, pub, session, keys)
}

// Seal turns env into what the relay stores for a sealed envelope: its
// readable fields and its whole JSON sealed for (session, its id, from the
// machine); and its blob sealed for (session, "<id>/blob").
func (k *Keyring) Seal(session string, env *protocol.Envelope) (raw, blob []byte, err error) {
	key, epoch, err := k.Current(session)
	if err != nil {
		return nil, nil, err
	}
	plain, err := env.AppendJSON(nil)
	if err != nil {
		return nil, nil, fmt.Errorf("encode envelope: %w", err)
	}
	plain = k.link(session, env.ID, plain)
	sealed, err := key.SealEpoch(epoch, seal.AD{Session: session, ID: env.ID, Direction: seal.FromMachine}, plain)
	if err != nil {
		return nil, nil, err
	}
	raw, err = json.Marshal(protocol.SealedHeader(env, sealed))
	if err != nil {
		return nil, nil, err
	}
	if len(env.Blob) > 0 {
		if blob, err = key.SealBytesEpoch(epoch, seal.AD{Session: session, ID: env.ID + "/blob", Direction: seal.FromMachine}, env.Blob); err != nil {
			return nil, nil, err
		}
	}
	return raw, blob, nil
}

// SealInfo turns an announced info into what the relay may read of it —
// the mode, status, permission request ids and whether an error changed,
// which it needs for lists and notifications — and the bounded summary
// apps show, sealed for (session, "announce"). The relay could show an
// app an older sealed summary again; it cannot change one.
func (k *Keyring) SealInfo(session string, info json.RawMessage) (json.RawMessage, error) {
	key, epoch, err := k.Current(session)
	if err != nil {
		return nil, err
	}
	sum := protocol.SummarizeInfo(info)
	if end := k.keptChain(session); end.N > 0 {
		sum = protocol.AppendChainEnd(sum, end.N, end.Last)
	}
	if len(sum) > protocol.MaxSummaryBytes {
		// Too large for a list: without the requests' inputs (the app
		// shows a request with its tool call's arguments).
		var m map[string]any
		json.Unmarshal(sum, &m)
		if ps, ok := m["permissions"].([]any); ok {
			for _, p := range ps {
				if q, ok := p.(map[string]any); ok {
					delete(q, "input")
				}
			}
		}
		sum, _ = json.Marshal(m)
	}
	sealed, err := key.SealEpoch(epoch, seal.AD{Session: session, ID: "announce", Direction: seal.FromMachine}, sum)
	if err != nil {
		return nil, err
	}
	var a struct {
		Mode        string `json:"mode"`
		Status      string `json:"status"`
		Error       string `json:"error"`
		Permissions []struct {
			ID string `json:"id"`
		} `json:"permissions"`
	}
	if err := json.Unmarshal(info, &a); err != nil {
		return nil, fmt.Errorf("announce: %w", err)
	}
	out := map[string]any{"mode": a.Mode, "status": a.Status, "sealed": sealed}
	if a.Error != "" {
		// Which error, not what it says: a digest under the session key.
		out["error"] = "sealed:" + errorDigest(key.Bytes(), a.Error)
	}
	if len(a.Permissions) > 0 {
		ids := make([]map[string]string, 0, len(a.Permissions))
		for _, p := range a.Permissions {
			ids = append(ids, map[string]string{"id": p.ID})
		}
		out["permissions"] = ids
	}
	return json.Marshal(out)
}

// errorDigest names an error text without telling it: an HMAC under the
// session key, cut to 16 hex digits.
func errorDigest(key []byte, text string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("ccrelay/error/v1\x00" + text))
	return hex.EncodeToString(m.Sum(nil)[:8])
}

// SealLive seals a live frame's payload for (session, "live").
func (k *Keyring) SealLive(session string, payload json.RawMessage) (json.RawMessage, error) {
	key, epoch, err := k.Current(session)
	if err != nil {
		return nil, err
	}
	sealed, err := key.SealEpoch(epoch, seal.AD{Session: session, ID: "live", Direction: seal.FromMachine}, payload)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]string{"sealed": sealed})
}

// OpenCommand opens a sealed command of session: sealed by a device for
// (session, its id, from the device), with the same id and kind inside,
// under the session's current key: one sealed under a key that was
// replaced when a device was revoked is refused (that device could have
// made it).
func (k *Keyring) OpenCommand(session string, c protocol.Command) (protocol.Command, error) {
	if _, err := k.existingKey(session); err != nil {
		return c, err
	}
	raw, err := seal.DecodeSealed(c.Sealed)
	if err != nil {
		return c, fmt.Errorf("a sealed command that does not open: %w", err)
	}
	epoch, _ := seal.Epoch(raw)
	key, current, err := k.Current(session)
	if err != nil {
		return c, err
	}
	if epoch != current {
		return c, fmt.Errorf("a sealed command under the session's key of epoch %d, not its current one (%d): a key replaced when a device was revoked opens nothing new", epoch, current)
	}
	plain, err := key.OpenBytes(seal.AD{Session: session, ID: c.ID, Direction: seal.FromDevice}, raw)
	if err != nil {
		return c, fmt.Errorf("a sealed command that does not open: %w", err)
	}
	var in protocol.Command
	if err := json.Unmarshal(plain, &in); err != nil {
		return c, fmt.Errorf("a sealed command that is not a command: %w", err)
	}
	if in.ID != c.ID || in.Kind != c.Kind || in.Sealed != "" {
		return c, errors.New("a sealed command whose id or kind differs from what the relay saw")
	}
	if err := in.Validate(); err != nil {
		return c, err
	}
	return in, nil
}
