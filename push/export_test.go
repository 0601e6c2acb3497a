package push

import (
	"crypto/ecdh"
	"time"
)

// SetBackoff replaces a sender's backoff (tests wait milliseconds).
func SetBackoff(w *WebPush, f func(int, time.Duration) time.Duration) { w.q.backoff = f }

// EncryptWith is encrypt with the sender's key and salt given.
func EncryptWith(plaintext, p256dh, auth []byte, as *ecdh.PrivateKey, salt []byte) ([]byte, error) {
	return encrypt(plaintext, p256dh, auth, as, salt)
}
