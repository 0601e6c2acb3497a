package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
)

const (
	// Version is the first byte of a sealed value or wrapped key under a
	// session's first key (epoch 0), the only form before key rotation.
	Version byte = 1
	// VersionEpoch is the first byte of a sealed value under a later key
	// of the session (epoch 1 and on, after a device was revoked: see
	// [WrapKeys]), followed by the epoch (two bytes, big-endian), and of a
	// wrapped key that carries several epochs. A reader refuses any
	// version but these two (ErrVersion).
	VersionEpoch byte = 2
	// MaxEpochs bounds a session's keys: its first and the ones made at
	// each revocation while it lives.
	MaxEpochs = 256
	// KeySize is the size of a session key: AES-256.
	KeySize = 32
	// NonceSize is the size of the random AES-GCM nonce of a sealed value.
	NonceSize = 12
	// TagSize is the size of an AES-GCM authentication tag.
	TagSize = 16
	// Overhead is how many bytes sealing adds under epoch 0: version,
	// nonce and tag.
	Overhead = 1 + NonceSize + TagSize
	// OverheadEpoch is how many bytes sealing adds under a later epoch:
	// version, epoch, nonce and tag.
	OverheadEpoch = Overhead + 2
	// MaxPlaintextBytes is the largest value Seal accepts: the relay's
	// largest envelope (4 MiB).
	MaxPlaintextBytes = 4 << 20
	// MaxSealedChars is the longest text Open decodes: a sealed
	// MaxPlaintextBytes value. Longer text is refused before decoding.
	MaxSealedChars = ((MaxPlaintextBytes+OverheadEpoch)*8 + 5) / 6
	// MaxADFieldBytes bounds the session id and the id of the associated
	// data (a UUID is 36 bytes, a cuid2 at most 32).
	MaxADFieldBytes = 255
	// adLabel starts the associated data, so that it means nothing to any
	// other protocol.
	adLabel = "ccrelay/seal/v1"
)

var (
	// ErrMalformed is a sealed value that is not one: bad base64url, too
	// short or too long.
	ErrMalformed = errors.New("seal: malformed sealed value")
	// ErrVersion is a sealed value or wrapped key of an unknown version.
	ErrVersion = errors.New("seal: unknown version")
	// ErrOpen is a sealed value that does not open under this key and
	// associated data: tampered with, moved, or sealed under another key.
	ErrOpen = errors.New("seal: authentication failed")
)

// Direction says who sealed a value.
type Direction byte

const (
	// FromMachine: envelope bodies, announce content fields, live deltas.
	FromMachine Direction = 1
	// FromDevice: app commands.
	FromDevice Direction = 2
)

func (d Direction) String() string {
	switch d {
	case FromMachine:
		return "from-machine"
	case FromDevice:
		return "from-device"
	}
	return fmt.Sprintf("direction(%d)", byte(d))
}

// AD is where a sealed value belongs: its associated data. A value sealed
// with one AD opens only with the same AD.
type AD struct {
	// Session is the session id.
	Session string
	// ID is the envelope id or the command id; for content that has no id
	// of its own (announce fields), a name for the field, such as
	// "announce.title".
	ID string
	// Direction is who sealed the value.
	Direction Direction
}

// bytes encodes the associated data unambiguously:
//
//	"ccrelay/seal/v1" 0x00 | version | direction | len(session) | session | len(id) | id
//
// with each length one byte.
func (ad AD) bytes() ([]byte, error) { return ad.bytesFor(Version) }

// bytesFor is the associated data of a value of the given version (the
// version byte differs, so a value cannot be moved from one form to the
// other).
func (ad AD) bytesFor(version byte) ([]byte, error) {
	if ad.Direction != FromMachine && ad.Direction != FromDevice {
		return nil, fmt.Errorf("seal: associated data: bad %v", ad.Direction)
	}
	if ad.Session == "" || len(ad.Session) > MaxADFieldBytes {
		return nil, fmt.Errorf("seal: associated data: session id of %d bytes (1 to %d)", len(ad.Session), MaxADFieldBytes)
	}
	if ad.ID == "" || len(ad.ID) > MaxADFieldBytes {
		return nil, fmt.Errorf("seal: associated data: id of %d bytes (1 to %d)", len(ad.ID), MaxADFieldBytes)
	}
	b := make([]byte, 0, len(adLabel)+5+len(ad.Session)+len(ad.ID))
	b = append(b, adLabel...)
	b = append(b, 0, version, byte(ad.Direction), byte(len(ad.Session)))
	b = append(b, ad.Session...)
	b = append(b, byte(len(ad.ID)))
	b = append(b, ad.ID...)
	return b, nil
}

// SessionKey is a session's 256-bit AES-GCM key. Its methods are safe for
// concurrent use.
type SessionKey struct {
	raw  [KeySize]byte
	aead cipher.AEAD // AES-256-GCM, random nonce prepended
}

// NewSessionKey makes a new random session key.
func NewSessionKey() (*SessionKey, error) {
	var raw [KeySize]byte
	rand.Read(raw[:]) // never fails (crypto/rand)
	return SessionKeyFromBytes(raw[:])
}

// SessionKeyFromBytes makes a session key of 32 bytes.
func SessionKeyFromBytes(b []byte) (*SessionKey, error) {
	if len(b) != KeySize {
		return nil, fmt.Errorf("seal: session key of %d bytes, want %d", len(b), KeySize)
	}
	k := &SessionKey{}
	copy(k.raw[:], b)
	block, err := aes.NewCipher(k.raw[:])
	if err != nil {
		return nil, fmt.Errorf("seal: session key: %w", err)
	}
	// A random 96-bit nonce per value: safe for 2^32 values per key, far
	// more than a session holds.
	k.aead, err = cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, fmt.Errorf("seal: session key: %w", err)
	}
	return k, nil
}

// Bytes is a copy of the key's 32 bytes, for wrapping and for the
// machine's own store.
func (k *SessionKey) Bytes() []byte { return append([]byte(nil), k.raw[:]...) }

// SealBytes seals plaintext for ad, in the binary wire format:
//
//	version (1) | nonce (12) | AES-256-GCM ciphertext | tag (16)
func (k *SessionKey) SealBytes(ad AD, plaintext []byte) ([]byte, error) {
	return k.SealBytesEpoch(0, ad, plaintext)
}

// SealBytesEpoch seals plaintext for ad under this key as the session's key
// of the given epoch. Epoch 0 is SealBytes's format; a later epoch is
//
//	VersionEpoch (1) | epoch (2, big-endian) | nonce (12) | AES-256-GCM ciphertext | tag (16)
//
// with VersionEpoch in the associated data.
func (k *SessionKey) SealBytesEpoch(epoch int, ad AD, plaintext []byte) ([]byte, error) {
	if len(plaintext) > MaxPlaintextBytes {
		return nil, fmt.Errorf("seal: %d bytes to seal, at most %d", len(plaintext), MaxPlaintextBytes)
	}
	if epoch < 0 || epoch >= MaxEpochs {
		return nil, fmt.Errorf("seal: epoch %d (0 to %d)", epoch, MaxEpochs-1)
	}
	version := Version
	if epoch > 0 {
		version = VersionEpoch
	}
	adb, err := ad.bytesFor(version)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 1, len(plaintext)+OverheadEpoch)
	out[0] = version
	if epoch > 0 {
		out = binary.BigEndian.AppendUint16(out, uint16(epoch))
	}
	return k.aead.Seal(out, nil, plaintext, adb), nil
}

// Seal seals plaintext for ad and returns the text form of the sealed value
// (the binary format in base64url), ready for a JSON string.
func (k *SessionKey) Seal(ad AD, plaintext []byte) (string, error) {
	return k.SealEpoch(0, ad, plaintext)
}

// SealEpoch is Seal under this key as the session's key of the given
// epoch (see SealBytesEpoch).
func (k *SessionKey) SealEpoch(epoch int, ad AD, plaintext []byte) (string, error) {
	b, err := k.SealBytesEpoch(epoch, ad, plaintext)
	if err != nil {
		return "", err
	}
	return b64.EncodeToString(b), nil
}

// OpenBytes opens a value sealed by SealBytes or SealBytesEpoch under the
// same key and ad (the caller picks the key of the value's epoch: [Epoch]).
func (k *SessionKey) OpenBytes(ad AD, sealed []byte) ([]byte, error) {
	body, _, err := checkSealed(sealed)
	if err != nil {
		return nil, err
	}
	adb, err := ad.bytesFor(sealed[0])
	if err != nil {
		return nil, err
	}
	pt, err := k.aead.Open(nil, nil, body, adb)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}

// Open opens the text form made by Seal under the same key and ad.
func (k *SessionKey) Open(ad AD, sealed string) ([]byte, error) {
	raw, err := DecodeSealed(sealed)
	if err != nil {
		return nil, err
	}
	return k.OpenBytes(ad, raw)
}

// DecodeSealed decodes the text form of a sealed value and checks its
// framing (length and version) without opening it.
func DecodeSealed(s string) ([]byte, error) {
	if len(s) > MaxSealedChars {
		return nil, fmt.Errorf("%w: %d characters, at most %d", ErrMalformed, len(s), MaxSealedChars)
	}
	raw, err := b64.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if _, _, err := checkSealed(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// Epoch is the epoch of the session key a binary sealed value was sealed
// under: 0 for the first form, the value's epoch field for the second.
func Epoch(sealed []byte) (int, error) {
	_, epoch, err := checkSealed(sealed)
	return epoch, err
}

// checkSealed checks the framing of a binary sealed value and returns what
// follows its header (version, and epoch if any) and its epoch.
func checkSealed(b []byte) (body []byte, epoch int, err error) {
	if len(b) < Overhead {
		return nil, 0, fmt.Errorf("%w: %d bytes, at least %d", ErrMalformed, len(b), Overhead)
	}
	switch b[0] {
	case Version:
		if len(b) > MaxPlaintextBytes+Overhead {
			return nil, 0, fmt.Errorf("%w: %d bytes, at most %d", ErrMalformed, len(b), MaxPlaintextBytes+Overhead)
		}
		return b[1:], 0, nil
	case VersionEpoch:
		if len(b) < OverheadEpoch || len(b) > MaxPlaintextBytes+OverheadEpoch {
			return nil, 0, fmt.Errorf("%w: %d bytes, %d to %d", ErrMalformed, len(b), OverheadEpoch, MaxPlaintextBytes+OverheadEpoch)
		}
		epoch = int(binary.BigEndian.Uint16(b[1:3]))
		if epoch == 0 || epoch >= MaxEpochs {
			return nil, 0, fmt.Errorf("%w: epoch %d", ErrMalformed, epoch)
		}
		return b[3:], epoch, nil
	}
	return nil, 0, fmt.Errorf("%w: %d", ErrVersion, b[0])
}

// putLen16 appends a two-byte big-endian length and the bytes.
func putLen16(b []byte, s []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}
