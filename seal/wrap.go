package seal

import (
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/hpke"
	"crypto/sha256"
	"errors"
	"fmt"
)

const (
	// encSize is the size of HPKE's encapsulated key for DHKEM(X25519).
	encSize = 32
	// WrappedSize is the size of a wrapped session key:
	// version | enc | HPKE ciphertext of the key | machine tag.
	WrappedSize = 1 + encSize + KeySize + TagSize + sha256.Size
	// wrapInfo starts HPKE's info, followed by 0x00 and the session id.
	wrapInfo = "ccrelay/session-key/v1"
	// wrapInfoEpochs starts HPKE's info of a wrapped key that carries
	// several epochs.
	wrapInfoEpochs = "ccrelay/session-key/v2"
	// MaxWrappedSize is the size of a wrapped key set of MaxEpochs keys.
	MaxWrappedSize = WrappedSize + (MaxEpochs-1)*KeySize
	// wrapAuth labels the machine's tag: the HKDF info of its key and the
	// start of what it covers.
	wrapAuth = "ccrelay/wrap-auth/v1"
)

// ErrUnwrap is a wrapped key that does not open: not for this device, not
// for this session, not from this machine, or tampered with.
var ErrUnwrap = errors.New("seal: wrapped key does not open")

// The HPKE suite: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-256-GCM.
var (
	hpkeKEM  = hpke.DHKEM(ecdh.X25519())
	hpkeKDF  = hpke.HKDFSHA256()
	hpkeAEAD = hpke.AES256GCM()
)

// WrapInfo is the HPKE info of the wrapped key of a session:
// "ccrelay/session-key/v1" 0x00 session.
func WrapInfo(session string) []byte {
	return append([]byte(wrapInfo+"\x00"), session...)
}

// WrapKey seals a session key for one device with HPKE base mode (RFC
// 9180) to the device's public key, with WrapInfo(session) as info, and
// appends the machine's tag: an HMAC-SHA256 keyed by the X25519 secret of the
// machine's and the device's keys, over the session, both public keys and
// the HPKE output. Base mode alone would let anyone who knows the device's
// public key (the relay) wrap a key of its own; the tag shows the device
// that the key comes from the machine it paired with. The text form is
// base64url.
func WrapKey(machine *KeyPair, device *ecdh.PublicKey, session string, key *SessionKey) (string, error) {
	if session == "" || len(session) > MaxADFieldBytes {
		return "", fmt.Errorf("seal: wrap: session id of %d bytes (1 to %d)", len(session), MaxADFieldBytes)
	}
	pk, err := hpke.NewDHKEMPublicKey(device)
	if err != nil {
		return "", fmt.Errorf("seal: wrap: %w", err)
	}
	ct, err := hpke.Seal(pk, hpkeKDF, hpkeAEAD, WrapInfo(session), key.raw[:])
	if err != nil {
		return "", fmt.Errorf("seal: wrap: %w", err)
	}
	out := make([]byte, 0, WrappedSize)
	out = append(out, Version)
	out = append(out, ct...) // enc | ciphertext
	tag, err := wrapTag(machine.priv, device, machine.Public(), device, Version, session, out[1:])
	if err != nil {
		return "", err
	}
	out = append(out, tag...)
	if len(out) != WrappedSize {
		return "", fmt.Errorf("seal: wrap: %d bytes, want %d", len(out), WrappedSize)
	}
	return b64.EncodeToString(out), nil
}

// UnwrapKey opens a session key wrapped by WrapKey for this device, checking
// first that the machine whose public key the device paired with made it.
func UnwrapKey(device *KeyPair, machine *ecdh.PublicKey, session, wrapped string) (*SessionKey, error) {
	if len(wrapped) != b64.EncodedLen(WrappedSize) {
		return nil, fmt.Errorf("%w: wrapped key of %d characters, want %d", ErrMalformed, len(wrapped), b64.EncodedLen(WrappedSize))
	}
	raw, err := b64.DecodeString(wrapped)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return unwrapBytes(device, machine, session, raw)
}

func unwrapBytes(device *KeyPair, machine *ecdh.PublicKey, session string, raw []byte) (*SessionKey, error) {
	if len(raw) != WrappedSize {
		return nil, fmt.Errorf("%w: wrapped key of %d bytes, want %d", ErrMalformed, len(raw), WrappedSize)
	}
	if raw[0] != Version {
		return nil, fmt.Errorf("%w: %d", ErrVersion, raw[0])
	}
	if session == "" || len(session) > MaxADFieldBytes {
		return nil, fmt.Errorf("seal: unwrap: session id of %d bytes (1 to %d)", len(session), MaxADFieldBytes)
	}
	body, tag := raw[1:WrappedSize-sha256.Size], raw[WrappedSize-sha256.Size:]
	want, err := wrapTag(device.priv, machine, machine, device.Public(), Version, session, body)
	if err != nil {
		return nil, ErrUnwrap
	}
	if !hmac.Equal(tag, want) {
		return nil, ErrUnwrap
	}
	sk, err := hpke.NewDHKEMPrivateKey(device.priv)
	if err != nil {
		return nil, fmt.Errorf("seal: unwrap: %w", err)
	}
	keyBytes, err := hpke.Open(sk, hpkeKDF, hpkeAEAD, WrapInfo(session), body)
	if err != nil {
		return nil, ErrUnwrap
	}
	return SessionKeyFromBytes(keyBytes)
}

// wrapTag is the machine's tag over a wrapped key. Both ends compute the
// same X25519 secret: the machine from its private key and the device's
// public key, the device the other way round.
//
//	key = HKDF-SHA256(secret = X25519(machine, device), salt = "", info = "ccrelay/wrap-auth/v1", 32)
//	tag = HMAC-SHA256(key, "ccrelay/wrap-auth/v1" 0x00 | version | len16(session) | session | machine public | device public | enc | ciphertext)
func wrapTag(own *ecdh.PrivateKey, peer, machine, device *ecdh.PublicKey, version byte, session string, body []byte) ([]byte, error) {
	secret, err := own.ECDH(peer)
	if err != nil {
		return nil, fmt.Errorf("seal: wrap tag: %w", err)
	}
	key, err := hkdf.Key(sha256.New, secret, nil, wrapAuth, sha256.Size)
	if err != nil {
		return nil, fmt.Errorf("seal: wrap tag: %w", err)
	}
	m := hmac.New(sha256.New, key)
	msg := append([]byte(wrapAuth), 0, version)
	msg = putLen16(msg, []byte(session))
	msg = append(msg, machine.Bytes()...)
	msg = append(msg, device.Bytes()...)
	msg = append(msg, body...)
	m.Write(msg)
	return m.Sum(nil), nil
}

// WrapInfoEpochs is the HPKE info of a wrapped key set:
// "ccrelay/session-key/v2" 0x00 session.
func WrapInfoEpochs(session string) []byte {
	return append([]byte(wrapInfoEpochs+"\x00"), session...)
}

// WrapKeys wraps a session's keys, epoch 0 first, for one device. One key
// is WrapKey's form, which every version of the app opens. Several (the
// session's key was replaced when a device was revoked: each later epoch
// is wrapped only for the devices still trusted) are
//
//	VersionEpoch | enc (32) | HPKE ciphertext of key 0 | key 1 | … | key n (32 each, + 16) | machine tag (32)
//
// with WrapInfoEpochs(session) as info and VersionEpoch in the tag, so a
// device given the set opens the session's whole history, and one that
// was given only the first keys opens nothing sealed under a later one.
func WrapKeys(machine *KeyPair, device *ecdh.PublicKey, session string, keys []*SessionKey) (string, error) {
	if len(keys) == 0 || len(keys) > MaxEpochs {
		return "", fmt.Errorf("seal: wrap: %d keys (1 to %d)", len(keys), MaxEpochs)
	}
	if len(keys) == 1 {
		return WrapKey(machine, device, session, keys[0])
	}
	if session == "" || len(session) > MaxADFieldBytes {
		return "", fmt.Errorf("seal: wrap: session id of %d bytes (1 to %d)", len(session), MaxADFieldBytes)
	}
	pk, err := hpke.NewDHKEMPublicKey(device)
	if err != nil {
		return "", fmt.Errorf("seal: wrap: %w", err)
	}
	plain := make([]byte, 0, len(keys)*KeySize)
	for _, k := range keys {
		plain = append(plain, k.raw[:]...)
	}
	ct, err := hpke.Seal(pk, hpkeKDF, hpkeAEAD, WrapInfoEpochs(session), plain)
	clear(plain)
	if err != nil {
		return "", fmt.Errorf("seal: wrap: %w", err)
	}
	out := make([]byte, 0, WrappedSize+(len(keys)-1)*KeySize)
	out = append(out, VersionEpoch)
	out = append(out, ct...)
	tag, err := wrapTag(machine.priv, device, machine.Public(), device, VersionEpoch, session, out[1:])
	if err != nil {
		return "", err
	}
	out = append(out, tag...)
	if len(out) != WrappedSize+(len(keys)-1)*KeySize {
		return "", fmt.Errorf("seal: wrap: %d bytes, want %d", len(out), WrappedSize+(len(keys)-1)*KeySize)
	}
	return b64.EncodeToString(out), nil
}

// UnwrapKeys opens what WrapKeys made for this device: the session's keys,
// epoch 0 first (one for WrapKey's form).
func UnwrapKeys(device *KeyPair, machine *ecdh.PublicKey, session, wrapped string) ([]*SessionKey, error) {
	if len(wrapped) > b64.EncodedLen(MaxWrappedSize) {
		return nil, fmt.Errorf("%w: wrapped key of %d characters, at most %d", ErrMalformed, len(wrapped), b64.EncodedLen(MaxWrappedSize))
	}
	raw, err := b64.DecodeString(wrapped)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(raw) > 0 && raw[0] == Version {
		k, err := unwrapBytes(device, machine, session, raw)
		if err != nil {
			return nil, err
		}
		return []*SessionKey{k}, nil
	}
	if len(raw) < WrappedSize+KeySize || (len(raw)-WrappedSize)%KeySize != 0 {
		return nil, fmt.Errorf("%w: wrapped keys of %d bytes", ErrMalformed, len(raw))
	}
	if raw[0] != VersionEpoch {
		return nil, fmt.Errorf("%w: %d", ErrVersion, raw[0])
	}
	if session == "" || len(session) > MaxADFieldBytes {
		return nil, fmt.Errorf("seal: unwrap: session id of %d bytes (1 to %d)", len(session), MaxADFieldBytes)
	}
	body, tag := raw[1:len(raw)-sha256.Size], raw[len(raw)-sha256.Size:]
	want, err := wrapTag(device.priv, machine, machine, device.Public(), VersionEpoch, session, body)
	if err != nil || !hmac.Equal(tag, want) {
		return nil, ErrUnwrap
	}
	sk, err := hpke.NewDHKEMPrivateKey(device.priv)
	if err != nil {
		return nil, fmt.Errorf("seal: unwrap: %w", err)
	}
	plain, err := hpke.Open(sk, hpkeKDF, hpkeAEAD, WrapInfoEpochs(session), body)
	if err != nil {
		return nil, ErrUnwrap
	}
	defer clear(plain)
	keys := make([]*SessionKey, 0, len(plain)/KeySize)
	for i := 0; i+KeySize <= len(plain); i += KeySize {
		k, err := SessionKeyFromBytes(plain[i : i+KeySize])
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}
