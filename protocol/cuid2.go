// Package protocol is ccrelay's wire contract: the session envelope, its nine
// event kinds, validation, and the ids (cuid2) that make replay idempotent.
// It imports no other package of the module.
package protocol

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha3"
	"encoding/hex"
	"math/big"
	"os"
	"strconv"
	"sync"
	"time"
)

// IDLength is the length of every id this package makes (random or derived).
const IDLength = 24

const (
	cuidMinLen = 2
	cuidMaxLen = 32
)

// IsCuid reports whether s follows the cuid2 rules the protocol enforces:
// a lowercase letter, then lowercase letters or digits, 2 to 32 characters.
func IsCuid(s string) bool {
	if len(s) < cuidMinLen || len(s) > cuidMaxLen {
		return false
	}
	if s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// DeriveID returns a deterministic cuid2-shaped id for a source identity:
// "c" followed by the first 23 hex digits of SHA-256 over the parts, each
// part terminated by a NUL byte so that ("ab","c") and ("a","bc") differ.
// Hex digits are a subset of base36, so the result always passes IsCuid.
func DeriveID(parts ...string) string {
	// Short parts (ids, kinds) are hashed from a buffer on the stack.
	var buf [256]byte
	b := buf[:0]
	for _, p := range parts {
		b = append(append(b, p...), 0)
	}
	sum := sha256.Sum256(b)
	return derived(sum[:])
}

// SubagentID is the session subagent id for a provider tool_use id (DECISIONS
// D1): "c" + the first 23 hex digits of SHA-256("claude-subagent:" + id). The
// vectors agree with the existing app so ids match across implementations.
func SubagentID(providerToolID string) string {
	sum := sha256.Sum256([]byte("claude-subagent:" + providerToolID))
	return derived(sum[:])
}

func derived(sum []byte) string {
	var buf [IDLength]byte
	buf[0] = 'c'
	var hx [2 * sha256.Size]byte
	hex.Encode(hx[:], sum)
	copy(buf[1:], hx[:IDLength-1])
	return string(buf[:])
}

// New returns a fresh random cuid2 (24 characters) following the reference
// algorithm: a random lowercase letter, then the base36 SHA3-512 hash of the
// time, fresh entropy, a process-wide counter and a host fingerprint. Use it
// only where nothing identifies the source (a prompt typed in the app).
func New() string {
	gen.once.Do(gen.init)
	gen.mu.Lock()
	gen.counter++
	count := gen.counter
	gen.mu.Unlock()

	first := letters[randInt(len(letters))]
	input := strconv.FormatInt(time.Now().UnixMilli(), 36) +
		entropy(IDLength) +
		strconv.FormatUint(count, 36) +
		gen.fingerprint
	h := hash36(input)
	// The reference drops the first character of the hash (it is biased) and
	// then keeps length-1 characters.
	if len(h) < IDLength {
		h += entropy(IDLength)
	}
	return string(first) + h[1:IDLength]
}

const letters = "abcdefghijklmnopqrstuvwxyz"

type generator struct {
	once        sync.Once
	mu          sync.Mutex
	counter     uint64
	fingerprint string
}

var gen generator

func (g *generator) init() {
	g.counter = uint64(randInt(476782367))
	host, _ := os.Hostname()
	g.fingerprint = hash36(host + strconv.Itoa(os.Getpid()) + entropy(32))[:32]
}

func randInt(n int) int {
	v, err := rand.Int(rand.Reader, big.NewInt(int64(n)))
	if err != nil {
		// crypto/rand.Reader does not fail on supported platforms.
		return int(time.Now().UnixNano() % int64(n))
	}
	return int(v.Int64())
}

func entropy(n int) string {
	b := make([]byte, 0, n)
	for len(b) < n {
		b = strconv.AppendInt(b, int64(randInt(36)), 36)
	}
	return string(b[:n])
}

func hash36(s string) string {
	sum := sha3.Sum512([]byte(s))
	return new(big.Int).SetBytes(sum[:]).Text(36)
}
