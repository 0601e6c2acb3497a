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
	tag, err := wrapTag(machine.priv, device, machine.Public(), device, session, out[1:])
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
	want, err := wrapTag(device.priv, machine, machine, device.Public(), session, body)
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
func wrapTag(own *ecdh.PrivateKey, peer, machine, device *ecdh.PublicKey, session string, body []byte) ([]byte, error) {
	secret, err := own.ECDH(peer)
	if err != nil {
		return nil, fmt.Errorf("seal: wrap tag: %w", err)
	}
	key, err := hkdf.Key(sha256.New, secret, nil, wrapAuth, sha256.Size)
	if err != nil {
		return nil, fmt.Errorf("seal: wrap tag: %w", err)
	}
	m := hmac.New(sha256.New, key)
	msg := append([]byte(wrapAuth), 0, Version)
	msg = putLen16(msg, []byte(session))
	msg = append(msg, machine.Bytes()...)
	msg = append(msg, device.Bytes()...)
	msg = append(msg, body...)
	m.Write(msg)
	return m.Sum(nil), nil
}
