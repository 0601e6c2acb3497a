// Package push sends notifications that carry no session content: Web Push
// (RFC 8030 delivery, RFC 8291 message encryption, RFC 8292 VAPID) to the
// push services of browsers, and plain posts to an ntfy topic. It never sees
// what a session says: callers hand it a small payload (a session id, a
// kind, a sequence number) or, for ntfy, a fixed text and a link.
package push

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// Sizes of RFC 8291's aes128gcm messages.
const (
	// recordSize is the one record's size in the header (RFC 8188); a
	// payload fits one record.
	recordSize = 4096
	saltBytes  = 16
	authBytes  = 16
	// headerBytes: salt, record size, key id length, and the key id (the
	// sender's uncompressed P-256 public key).
	headerBytes = saltBytes + 4 + 1 + 65
	// MaxPayloadBytes is the largest plaintext Encrypt takes: RFC 8030
	// push services must accept 4,096-byte messages, and a message is the
	// header, the plaintext, its delimiter and the 16-byte tag.
	MaxPayloadBytes = recordSize - headerBytes - 1 - 16
)

// ErrPayloadTooBig is returned for a payload over MaxPayloadBytes.
var ErrPayloadTooBig = fmt.Errorf("push payload over %d bytes", MaxPayloadBytes)

// Encrypt encrypts plaintext for a subscription (its p256dh public key and
// auth secret) as RFC 8291 says: a fresh ephemeral key pair and salt per
// message, one aes128gcm record.
func Encrypt(plaintext, p256dh, auth []byte) ([]byte, error) {
	as, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("push: ephemeral key: %w", err)
	}
	salt := make([]byte, saltBytes)
	if _, err := rand.Read(salt); err != nil {
		return nil, fmt.Errorf("push: salt: %w", err)
	}
	return encrypt(plaintext, p256dh, auth, as, salt)
}

// encrypt is Encrypt with the sender's key pair and the salt given (RFC
// 8291's example fixes both).
func encrypt(plaintext, p256dh, auth []byte, as *ecdh.PrivateKey, salt []byte) ([]byte, error) {
	if len(plaintext) > MaxPayloadBytes {
		return nil, ErrPayloadTooBig
	}
	ua, err := ecdh.P256().NewPublicKey(p256dh)
	if err != nil {
		return nil, fmt.Errorf("push: subscription key: %w", err)
	}
	if len(auth) != authBytes {
		return nil, fmt.Errorf("push: auth secret is %d bytes, not %d", len(auth), authBytes)
	}
	asPub := as.PublicKey().Bytes()
	cek, nonce, err := keys(as, ua, p256dh, asPub, auth, salt)
	if err != nil {
		return nil, err
	}
	gcm, err := newGCM(cek)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, headerBytes+len(plaintext)+1+gcm.Overhead())
	out = append(out, salt...)
	out = binary.BigEndian.AppendUint32(out, recordSize)
	out = append(out, byte(len(asPub)))
	out = append(out, asPub...)
	record := append(append([]byte(nil), plaintext...), 2) // the last record's delimiter
	return gcm.Seal(out, nonce, record, nil), nil
}

// Decrypt opens an RFC 8291 message with the subscription's private key and
// auth secret: what a browser does (and what tests of a sender check).
func Decrypt(msg []byte, ua *ecdh.PrivateKey, auth []byte) ([]byte, error) {
	if len(msg) < saltBytes+5 {
		return nil, errors.New("push: message shorter than its header")
	}
	salt := msg[:saltBytes]
	rs := binary.BigEndian.Uint32(msg[saltBytes:])
	idLen := int(msg[saltBytes+4])
	if len(msg) < saltBytes+5+idLen {
		return nil, errors.New("push: message shorter than its key id")
	}
	asPub := msg[saltBytes+5 : saltBytes+5+idLen]
	ct := msg[saltBytes+5+idLen:]
	if rs < 18 || len(ct) > int(rs) {
		return nil, fmt.Errorf("push: record size %d does not hold the %d-byte record (one record only)", rs, len(ct))
	}
	as, err := ecdh.P256().NewPublicKey(asPub)
	if err != nil {
		return nil, fmt.Errorf("push: sender key: %w", err)
	}
	cek, nonce, err := keys(ua, as, ua.PublicKey().Bytes(), asPub, auth, salt)
	if err != nil {
		return nil, err
	}
	gcm, err := newGCM(cek)
	if err != nil {
		return nil, err
	}
	pt, err := gcm.Open(nil, nonce, ct, nil)
	if err != nil {
		return nil, fmt.Errorf("push: decrypt: %w", err)
	}
	for len(pt) > 0 && pt[len(pt)-1] == 0 { // padding
		pt = pt[:len(pt)-1]
	}
	if len(pt) == 0 || pt[len(pt)-1] != 2 {
		return nil, errors.New("push: no last-record delimiter")
	}
	return pt[:len(pt)-1], nil
}

// keys derives the content encryption key and nonce (RFC 8291 section 3.4):
// mine is this side's private key, theirs the other's public key.
func keys(mine *ecdh.PrivateKey, theirs *ecdh.PublicKey, uaPub, asPub, auth, salt []byte) (cek, nonce []byte, err error) {
	secret, err := mine.ECDH(theirs)
	if err != nil {
		return nil, nil, fmt.Errorf("push: ecdh: %w", err)
	}
	info := "WebPush: info\x00" + string(uaPub) + string(asPub)
	ikm, err := hkdf.Key(sha256.New, secret, auth, info, 32)
	if err != nil {
		return nil, nil, err
	}
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, nil, err
	}
	if cek, err = hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16); err != nil {
		return nil, nil, err
	}
	if nonce, err = hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12); err != nil {
		return nil, nil, err
	}
	return cek, nonce, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}
