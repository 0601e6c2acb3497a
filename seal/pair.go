package seal

import (
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

const (
	// PairingSecretSize is the size of the one-time pairing secret that
	// only the QR code carries: 128 bits, 22 characters of base64url.
	PairingSecretSize = 16
	// RedeemTokenSize is the size of the token derived from the pairing
	// secret that the phone may show the relay.
	RedeemTokenSize = 16
	pairRedeem      = "ccrelay/pair/redeem/v1"
	pairConfirm     = "ccrelay/pair/confirm/v1"
)

// ErrConfirm is a pairing confirmation that does not match: the public keys
// were swapped on the way, or the tag was not made with the pairing secret.
var ErrConfirm = errors.New("seal: pairing confirmation does not match: the public keys were changed on the way")

// Role is who makes a pairing confirmation. Each side's tag differs, so the
// relay cannot return one side's own tag to it as the other's.
type Role byte

const (
	RoleMachine Role = 1
	RoleDevice  Role = 2
	// RoleDeviceAccepted is the device's acceptance: the tag it makes only
	// after it checked that the relay passed on the machine key its link
	// names. The machine trusts a device only once it has it, so the two
	// ends of a pairing never disagree; a relay that swapped a key cannot
	// make it (it lacks the confirmation key).
	RoleDeviceAccepted Role = 3
)

// NewPairingSecret makes a one-time pairing secret, in its text form.
func NewPairingSecret() string {
	b := make([]byte, PairingSecretSize)
	rand.Read(b) // never fails (crypto/rand)
	return b64.EncodeToString(b)
}

// PairingKeys derives, from the pairing secret, a token the phone may send
// the relay (to redeem it, or look the pairing up) and the confirmation key,
// which never leaves the two ends. The relay learning the token learns
// nothing of the confirmation key.
//
//	redeem  = HKDF-SHA256(secret, salt = "", info = "ccrelay/pair/redeem/v1", 16)   (base64url)
//	confirm = HKDF-SHA256(secret, salt = "", info = "ccrelay/pair/confirm/v1", 32)
func PairingKeys(secret string) (redeem string, confirm []byte, err error) {
	raw, err := b64.DecodeString(secret)
	if err != nil || len(raw) != PairingSecretSize {
		return "", nil, fmt.Errorf("seal: pairing secret: want %d characters of base64url", b64.EncodedLen(PairingSecretSize))
	}
	r, err := hkdf.Key(sha256.New, raw, nil, pairRedeem, RedeemTokenSize)
	if err != nil {
		return "", nil, fmt.Errorf("seal: pairing secret: %w", err)
	}
	confirm, err = hkdf.Key(sha256.New, raw, nil, pairConfirm, sha256.Size)
	if err != nil {
		return "", nil, fmt.Errorf("seal: pairing secret: %w", err)
	}
	return b64.EncodeToString(r), confirm, nil
}

// ConfirmTag is one side's pairing confirmation, in text form:
//
//	HMAC-SHA256(confirm, "ccrelay/pair/confirm/v1" 0x00 | role | machine public | device public)
func ConfirmTag(confirm []byte, role Role, machine, device *ecdh.PublicKey) string {
	return b64.EncodeToString(confirmMAC(confirm, role, machine, device))
}

// CheckConfirm checks the other side's confirmation in constant time.
func CheckConfirm(confirm []byte, role Role, machine, device *ecdh.PublicKey, tag string) error {
	got, err := b64.DecodeString(tag)
	if err != nil {
		return ErrConfirm
	}
	if !hmac.Equal(got, confirmMAC(confirm, role, machine, device)) {
		return ErrConfirm
	}
	return nil
}

func confirmMAC(confirm []byte, role Role, machine, device *ecdh.PublicKey) []byte {
	m := hmac.New(sha256.New, confirm)
	m.Write([]byte(pairConfirm))
	m.Write([]byte{0, byte(role)})
	m.Write(machine.Bytes())
	m.Write(device.Bytes())
	return m.Sum(nil)
}
