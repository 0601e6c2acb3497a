package relay

// Session keys of end-to-end encryption (docs/security.md, "Session
// keys"): a CLI wraps each session's key for each device of its account
// that it trusts; the relay keeps the wrapped keys, which it cannot open,
// and gives each device its own.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/coder/websocket"
)

// sessionKeysTable holds wrapped session keys by session and device
// credential, with the public key of the machine that wrapped them.
const sessionKeysTable = `CREATE TABLE IF NOT EXISTS session_keys (
	session TEXT NOT NULL,
	device  TEXT NOT NULL,
	wrapped TEXT NOT NULL,
	machine TEXT NOT NULL,
	PRIMARY KEY (session, device)
) WITHOUT ROWID;
`

// Sizes of what a keys frame carries, as text (unpadded base64url): a
// wrapped key (seal.WrappedSize, 113 bytes), or a wrapped key set of a
// session whose key was rotated (32 bytes more for each later epoch, up to
// seal.MaxEpochs keys), and an X25519 public key.
const (
	wrappedKeyChars = 151
	wrappedKeyBytes = 113
	maxKeyEpochs    = 256
	publicKeyChars  = 43
)

// isWrappedKey reports whether s is the text of a wrapped key or key set.
func isWrappedKey(s string) bool {
	n := len(s) * 6 / 8 // the bytes of unpadded base64url of len(s) characters
	if n < wrappedKeyBytes || (n-wrappedKeyBytes)%32 != 0 || (n-wrappedKeyBytes)/32 >= maxKeyEpochs || (n*8+5)/6 != len(s) {
		return false
	}
	return isBase64URL(s, len(s))
}

// PutSessionKeys stores session's key wrapped for devices, by machine;
// ErrDeleted for a deleted session.
func (s *Store) PutSessionKeys(ctx context.Context, session, machine string, keys []protocol.WrappedKey) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store session keys: %w", err)
	}
	defer tx.Rollback()
	// The session's row is held as an append holds it (see dropSession):
	// a delete waits for these keys and removes them, or these wait for
	// the delete and find its tombstone.
	var one int
	switch err := tx.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`+tx.d.rowLock(), session).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		var gone int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM tombstones WHERE id = ?`, session).Scan(&gone); err != nil {
			return fmt.Errorf("store session keys: %w", err)
		}
		if gone > 0 {
			return fmt.Errorf("store session keys: %w", ErrDeleted)
		}
	case err != nil:
		return fmt.Errorf("store session keys: %w", err)
	}
	for _, k := range keys {
		if _, err := tx.ExecContext(ctx, `INSERT INTO session_keys (session, device, wrapped, machine) VALUES (?, ?, ?, ?)
			ON CONFLICT (session, device) DO UPDATE SET wrapped = excluded.wrapped, machine = excluded.machine`, session, k.Device, k.Wrapped, machine); err != nil {
			return fmt.Errorf("store session keys: %w", err)
		}
	}
	return tx.Commit()
}

// SessionSealed reports whether session is end-to-end encrypted: its
// machine gave the relay a wrapped key for it, or announced it sealed.
// Such a session takes sealed commands only (Server.command).
func (s *Store) SessionSealed(ctx context.Context, session string) (bool, error) {
	var one int
	switch err := s.r.QueryRowContext(ctx, `SELECT 1 FROM session_keys WHERE session = ? LIMIT 1`, session).Scan(&one); {
	case err == nil:
		return true, nil
	case !errors.Is(err, sql.ErrNoRows):
		return false, fmt.Errorf("is %s sealed: %w", session, err)
	}
	var info string
	switch err := s.r.QueryRowContext(ctx, `SELECT info FROM sessions WHERE id = ?`, session).Scan(&info); {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("is %s sealed: %w", session, err)
	}
	var v struct {
		Sealed json.RawMessage `json:"sealed"`
	}
	if json.Unmarshal([]byte(info), &v) != nil {
		return false, nil
	}
	return len(v.Sealed) > 0 && string(v.Sealed) != "null" && string(v.Sealed) != `""`, nil
}

// ErrNoSessionKey: no key of the session for the device.
var ErrNoSessionKey = errors.New("no session key for this device")

// SessionKeyFor is session's key wrapped for device, and the machine that
// wrapped it.
func (s *Store) SessionKeyFor(ctx context.Context, session, device string) (wrapped, machine string, err error) {
	err = s.r.QueryRowContext(ctx, `SELECT wrapped, machine FROM session_keys WHERE session = ? AND device = ?`, session, device).Scan(&wrapped, &machine)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", ErrNoSessionKey
	}
	if err != nil {
		return "", "", fmt.Errorf("read session key: %w", err)
	}
	return wrapped, machine, nil
}

// keyedDevices are account's device credentials that have an X25519
// public key: the devices a CLI may wrap keys for.
func (s *Server) keyedDevices(ctx context.Context, account string) ([]protocol.DeviceInfo, error) {
	creds, err := s.store.Credentials(ctx, account)
	if err != nil {
		return nil, err
	}
	out := []protocol.DeviceInfo{}
	for _, c := range creds {
		if c.Role == RoleDevice && len(c.PublicKey) == 32 {
			out = append(out, protocol.DeviceInfo{ID: c.ID, Name: c.Name})
		}
	}
	return out, nil
}

// tellDevices sends every CLI connection of account the account's keyed
// devices (after a pairing or a revocation). It never blocks.
func (s *Server) tellDevices(ctx context.Context, account string) {
	devs, err := s.keyedDevices(ctx, account)
	if err != nil {
		s.log.Error("list devices for the CLIs", "err", err)
		return
	}
	s.peersMu.Lock()
	var clis []*peer
	for p := range s.clis {
		if p.owner == account {
			clis = append(clis, p)
		}
	}
	s.peersMu.Unlock()
	for _, p := range clis {
		p.send(protocol.Frame{Type: protocol.FrameDevices, Devices: devs})
	}
}

// addCLI registers a CLI connection and tells it its account's devices,
// if it has any (a CLI that hears nothing has none); the returned func
// forgets it.
func (s *Server) addCLI(ctx context.Context, me *peer) func() {
	s.peersMu.Lock()
	s.clis[me] = struct{}{}
	s.peersMu.Unlock()
	if devs, err := s.keyedDevices(ctx, me.owner); err == nil && len(devs) > 0 {
		me.send(protocol.Frame{Type: protocol.FrameDevices, Devices: devs})
	}
	return func() {
		s.peersMu.Lock()
		delete(s.clis, me)
		s.peersMu.Unlock()
	}
}

// isBase64URL reports whether s is unpadded base64url text of n characters.
func isBase64URL(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !protocol.IsBase64URLByte(s[i]) {
			return false
		}
	}
	return true
}

// storeKeys handles a CLI's FrameKeys: the session is the CLI's (claimed
// like an envelope batch), each device a keyed device of its account, each
// key of a wrapped key's size. Apps of those devices that follow the
// session get their key at once.
func (s *Server) storeKeys(ctx context.Context, c *websocket.Conn, me *peer, f protocol.Frame) error {
	refuse := func(format string, args ...any) error {
		e := errorFrame("bad-keys", format, args...)
		e.Ref = f.Ref
		return writeFrame(ctx, c, e)
	}
	if err := checkSession(f.Session); err != nil {
		return refuse("%v", err)
	}
	if !isBase64URL(f.Machine, publicKeyChars) {
		return refuse("machine must be an X25519 public key in base64url")
	}
	if len(f.Keys) == 0 || len(f.Keys) > MaxCredentials {
		return refuse("a keys frame carries 1 to %d keys, not %d", MaxCredentials, len(f.Keys))
	}
	devs, err := s.keyedDevices(ctx, me.owner)
	if err != nil {
		e := errorFrame("store", "the relay's store failed")
		e.Ref = f.Ref
		return writeFrame(ctx, c, e)
	}
	for _, k := range f.Keys {
		if !slices.ContainsFunc(devs, func(d protocol.DeviceInfo) bool { return d.ID == k.Device }) {
			return refuse("device %q is not a device of this account with a key", clip(k.Device, 40))
		}
		if !isWrappedKey(k.Wrapped) {
			return refuse("a wrapped key is base64url of %d bytes, or of 32 more for each later epoch of the session", wrappedKeyBytes)
		}
	}
	if err := s.claim(ctx, f.Session); err != nil {
		return writeFrame(ctx, c, claimRefused(f, err))
	}
	if err := s.store.PutSessionKeys(ctx, f.Session, f.Machine, f.Keys); errors.Is(err, ErrDeleted) {
		return writeFrame(ctx, c, claimRefused(f, err)) // deleted since the claim
	} else if err != nil {
		s.storeFailed("store session keys", f.Session, err)
		e := errorFrame("store", "the relay's store failed")
		e.Ref = f.Ref
		return writeFrame(ctx, c, e)
	}
	// Every app of those devices, here and on the other relays, gets its
	// key at once, whatever it shows: a device trusted while the session
	// runs opens it (its list, its page) without loading again.
	for _, k := range f.Keys {
		for _, app := range s.appsOf(me.owner, k.Device) {
			app.send(protocol.Frame{Type: protocol.FrameSessionKey, Session: f.Session, Wrapped: k.Wrapped, Machine: f.Machine})
		}
	}
	s.fanSend(ctx, fanMsg{Kind: "k", Session: f.Session, Owner: me.owner})
	return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameAck, Ref: f.Ref, Session: f.Session})
}

// fanKeysStored gives this node's apps of owner the keys another node
// stored for session (a notice "k"), each its own device's.
func (s *Server) fanKeysStored(ctx context.Context, session, owner string) {
	s.peersMu.Lock()
	devices := make([]string, 0, len(s.apps))
	for d := range s.apps {
		devices = append(devices, d)
	}
	s.peersMu.Unlock()
	for _, d := range devices {
		apps := s.appsOf(owner, d)
		if len(apps) == 0 {
			continue
		}
		wrapped, machine, err := s.store.SessionKeyFor(ctx, session, d)
		if err != nil {
			continue // none for this device (or the store failed: it asks at its next subscribe)
		}
		for _, app := range apps {
			app.send(protocol.Frame{Type: protocol.FrameSessionKey, Session: session, Wrapped: wrapped, Machine: machine})
		}
	}
}

// sendSessionKey gives an app of a device the session's key, if the
// relay holds one for it.
func (s *Server) sendSessionKey(ctx context.Context, c *websocket.Conn, device, session string) error {
	if device == "" {
		return nil
	}
	wrapped, machine, err := s.store.SessionKeyFor(ctx, session, device)
	if errors.Is(err, ErrNoSessionKey) {
		return nil
	}
	if err != nil {
		return err
	}
	return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameSessionKey, Session: session, Wrapped: wrapped, Machine: machine})
}
