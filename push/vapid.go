package push

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// KeyFile is the name of the VAPID key file older relays kept in their
// data folder (now the key is in the relay's store, shared by its nodes).
const KeyFile = "vapid.pem"

// TokenLifetime is how long a VAPID token is valid (RFC 8292 allows at most
// 24 hours); a new one is signed for every message.
const TokenLifetime = 12 * time.Hour

var b64 = base64.RawURLEncoding

// Keys are the relay's VAPID key pair (RFC 8292): P-256, signing ES256
// tokens that tell push services which server sends.
type Keys struct{ priv *ecdsa.PrivateKey }

// ParseKeys reads a key pair as MarshalKeys writes it: a PEM block
// "PRIVATE KEY" holding a PKCS #8 P-256 key (the format of KeyFile).
func ParseKeys(b []byte) (*Keys, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("vapid key is not PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("vapid key: %w", err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, errors.New("vapid key is not a P-256 key")
	}
	return &Keys{priv: ek}, nil
}

// MarshalKeys writes k's private key as ParseKeys reads it. It is a
// secret: whoever holds it can push to the devices subscribed with it.
func MarshalKeys(k *Keys) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.priv)
	if err != nil {
		return nil, fmt.Errorf("vapid key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ReadKeyFile reads the key pair an older relay kept in dir (KeyFile):
// an error that wraps os.ErrNotExist when there is none.
func ReadKeyFile(dir string) (*Keys, error) {
	path := filepath.Join(dir, KeyFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read vapid key: %w", err)
	}
	k, err := ParseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// NewKeys makes a fresh key pair (kept in memory only).
func NewKeys() (*Keys, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("make vapid key: %w", err)
	}
	return &Keys{priv: k}, nil
}

// PublicKey is the public key as browsers take it for
// PushManager.subscribe's applicationServerKey: the uncompressed point,
// base64url without padding.
func (k *Keys) PublicKey() string {
	b, _ := k.priv.PublicKey.Bytes() // a P-256 key always encodes
	return b64.EncodeToString(b)
}

// Authorization is the Authorization header for a message to endpoint
// (RFC 8292 section 3): "vapid t=<ES256 JWT>, k=<public key>", the token's
// audience the endpoint's origin, its subject the relay's contact (a
// mailto: or https: URL).
func (k *Keys) Authorization(endpoint, subject string, now time.Time) (string, error) {
	aud, err := Origin(endpoint)
	if err != nil {
		return "", err
	}
	head := b64.EncodeToString([]byte(`{"typ":"JWT","alg":"ES256"}`))
	claims, _ := json.Marshal(map[string]any{"aud": aud, "exp": now.Add(TokenLifetime).Unix(), "sub": subject})
	signing := head + "." + b64.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, k.priv, sum[:])
	if err != nil {
		return "", fmt.Errorf("sign vapid token: %w", err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return "vapid t=" + signing + "." + b64.EncodeToString(sig) + ", k=" + k.PublicKey(), nil
}

// Origin is the scheme and host of a URL, a VAPID token's audience.
func Origin(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("push endpoint %q is not an absolute URL", endpoint)
	}
	return u.Scheme + "://" + u.Host, nil
}

// Claims are what a VAPID token says.
type Claims struct {
	Aud string `json:"aud"`
	Exp int64  `json:"exp"`
	Sub string `json:"sub"`
}

// VerifyAuthorization checks an Authorization header as a push service
// does (RFC 8292): the "vapid" scheme, an ES256 token signed by the key k=
// names, for audience, not expired at now and valid for at most 24 hours,
// with a subject. It returns the public key (base64url) and the claims.
func VerifyAuthorization(header, audience string, now time.Time) (string, Claims, error) {
	var c Claims
	rest, ok := strings.CutPrefix(header, "vapid ")
	if !ok {
		return "", c, errors.New("not the vapid scheme")
	}
	var tok, key string
	for _, p := range strings.Split(rest, ",") {
		name, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		switch name {
		case "t":
			tok = v
		case "k":
			key = v
		}
	}
	kb, err := b64.DecodeString(key)
	if err != nil {
		return "", c, fmt.Errorf("k: %w", err)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), kb)
	if err != nil {
		return "", c, fmt.Errorf("k: %w", err)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", c, errors.New("t is not a JWT")
	}
	hb, err := b64.DecodeString(parts[0])
	if err != nil {
		return "", c, fmt.Errorf("jwt header: %w", err)
	}
	var h struct{ Typ, Alg string }
	if json.Unmarshal(hb, &h) != nil || h.Alg != "ES256" {
		return "", c, fmt.Errorf("jwt header %s: not ES256", hb)
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return "", c, errors.New("jwt signature is not 64 bytes of base64url")
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return "", c, errors.New("jwt signature does not verify")
	}
	cb, err := b64.DecodeString(parts[1])
	if err != nil || json.Unmarshal(cb, &c) != nil {
		return "", c, errors.New("jwt claims are not JSON")
	}
	switch {
	case c.Aud != audience:
		return "", c, fmt.Errorf("jwt aud %q, want %q", c.Aud, audience)
	case c.Exp <= now.Unix():
		return "", c, errors.New("jwt expired")
	case c.Exp > now.Add(24*time.Hour).Unix():
		return "", c, errors.New("jwt valid for more than 24 hours")
	case !strings.HasPrefix(c.Sub, "mailto:") && !strings.HasPrefix(c.Sub, "https:"):
		return "", c, fmt.Errorf("jwt sub %q is not a mailto: or https: URL", c.Sub)
	}
	return key, c, nil
}
