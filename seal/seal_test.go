package seal

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

const (
	testSession = "0b6a4d3e-5f1c-4a7e-9c2d-1e8f7a6b5c4d"
	testEnvID   = "tz4a98xxat96iws9zmbrgj3a"
)

func newKey(t testing.TB) *SessionKey {
	t.Helper()
	k, err := NewSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpenRoundTrip(t *testing.T) {
	k := newKey(t)
	ad := AD{Session: testSession, ID: testEnvID, Direction: FromMachine}
	for _, n := range []int{0, 1, 15, 16, 17, 1000, 64 << 10, MaxPlaintextBytes} {
		pt := bytes.Repeat([]byte{'x'}, n)
		s, err := k.Seal(ad, pt)
		if err != nil {
			t.Fatalf("seal %d bytes: %v", n, err)
		}
		if want := b64.EncodedLen(n + Overhead); len(s) != want {
			t.Errorf("%d bytes sealed to %d characters, want %d", n, len(s), want)
		}
		if strings.ContainsAny(s, "+/=") {
			t.Errorf("sealed text is not unpadded base64url: %.20q", s)
		}
		got, err := k.Open(ad, s)
		if err != nil {
			t.Fatalf("open %d bytes: %v", n, err)
		}
		if !bytes.Equal(got, pt) {
			t.Fatalf("open %d bytes: got %d other bytes", n, len(got))
		}
	}
	if got := b64.EncodedLen(MaxPlaintextBytes + OverheadEpoch); got != MaxSealedChars {
		t.Errorf("MaxSealedChars = %d, a sealed MaxPlaintextBytes value is %d", MaxSealedChars, got)
	}
}

func TestSealFreshNonce(t *testing.T) {
	k := newKey(t)
	ad := AD{Session: testSession, ID: testEnvID, Direction: FromMachine}
	a, _ := k.Seal(ad, []byte("same"))
	b, _ := k.Seal(ad, []byte("same"))
	if a == b {
		t.Fatal("two seals of the same value are identical: the nonce is not fresh")
	}
}

func TestSealRefusesOversize(t *testing.T) {
	k := newKey(t)
	ad := AD{Session: testSession, ID: testEnvID, Direction: FromMachine}
	if _, err := k.Seal(ad, make([]byte, MaxPlaintextBytes+1)); err == nil {
		t.Fatal("sealed more than MaxPlaintextBytes")
	}
}

func TestSessionKeyBytes(t *testing.T) {
	k := newKey(t)
	k2, err := SessionKeyFromBytes(k.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	ad := AD{Session: testSession, ID: testEnvID, Direction: FromDevice}
	s, _ := k.Seal(ad, []byte("prompt"))
	if got, err := k2.Open(ad, s); err != nil || string(got) != "prompt" {
		t.Fatalf("key from Bytes does not open: %q %v", got, err)
	}
	b := k.Bytes()
	b[0] ^= 1
	if !bytes.Equal(k.Bytes()[1:], b[1:]) || k.Bytes()[0] == b[0] {
		t.Fatal("Bytes does not return a copy")
	}
	for _, n := range []int{0, 16, 31, 33} {
		if _, err := SessionKeyFromBytes(make([]byte, n)); err == nil {
			t.Errorf("accepted a session key of %d bytes", n)
		}
	}
}

// TestOpenRefusesTampering: whatever is changed, moved or cut, Open refuses
// it with the right error and returns no plaintext.
func TestOpenRefusesTampering(t *testing.T) {
	k, other := newKey(t), newKey(t)
	ad := AD{Session: testSession, ID: testEnvID, Direction: FromMachine}
	pt := []byte(`{"kind":"text","text":"the prompt"}`)
	raw, err := k.SealBytes(ad, pt)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) string {
		b := bytes.Clone(raw)
		b[i] ^= 0x01
		return b64.EncodeToString(b)
	}
	withVersion := func(v byte) string {
		b := bytes.Clone(raw)
		b[0] = v
		return b64.EncodeToString(b)
	}
	good := b64.EncodeToString(raw)
	cases := []struct {
		name   string
		key    *SessionKey
		ad     AD
		sealed string
		want   error
	}{
		{"flipped nonce byte", k, ad, flip(1), ErrOpen},
		{"flipped last nonce byte", k, ad, flip(NonceSize), ErrOpen},
		{"flipped ciphertext byte", k, ad, flip(1 + NonceSize + 3), ErrOpen},
		{"flipped tag byte", k, ad, flip(len(raw) - 1), ErrOpen},
		{"other session", k, AD{Session: "1b6a4d3e-5f1c-4a7e-9c2d-1e8f7a6b5c4d", ID: testEnvID, Direction: FromMachine}, good, ErrOpen},
		{"other position", k, AD{Session: testSession, ID: "uz4a98xxat96iws9zmbrgj3a", Direction: FromMachine}, good, ErrOpen},
		{"other direction", k, AD{Session: testSession, ID: testEnvID, Direction: FromDevice}, good, ErrOpen},
		{"other key", other, ad, good, ErrOpen},
		{"truncated tag", k, ad, b64.EncodeToString(raw[:len(raw)-1]), ErrOpen},
		{"truncated to overhead", k, ad, b64.EncodeToString(raw[:Overhead]), ErrOpen},
		{"shorter than overhead", k, ad, b64.EncodeToString(raw[:Overhead-1]), ErrMalformed},
		{"empty", k, ad, "", ErrMalformed},
		{"version 0", k, ad, withVersion(0), ErrVersion},
		{"version 3", k, ad, withVersion(3), ErrVersion},
		{"padded base64", k, ad, good + "=", ErrMalformed},
		{"standard base64", k, ad, strings.NewReplacer("-", "+", "_", "/").Replace(good) + "+/", ErrMalformed},
		{"too long", k, ad, strings.Repeat("A", MaxSealedChars+1), ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.key.Open(c.ad, c.sealed)
			if !errors.Is(err, c.want) {
				t.Fatalf("Open: %v, want %v", err, c.want)
			}
			if got != nil {
				t.Fatalf("Open returned %d bytes with an error", len(got))
			}
		})
	}
	if got, err := k.Open(ad, good); err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("the untouched value does not open: %v", err)
	}
}

func TestADValidation(t *testing.T) {
	k := newKey(t)
	long := strings.Repeat("a", MaxADFieldBytes+1)
	for _, ad := range []AD{
		{Session: "", ID: testEnvID, Direction: FromMachine},
		{Session: testSession, ID: "", Direction: FromMachine},
		{Session: testSession, ID: testEnvID, Direction: 0},
		{Session: testSession, ID: testEnvID, Direction: 3},
		{Session: long, ID: testEnvID, Direction: FromMachine},
		{Session: testSession, ID: long, Direction: FromMachine},
	} {
		if _, err := k.Seal(ad, []byte("x")); err == nil {
			t.Errorf("sealed with %+v", ad)
		}
	}
	max := strings.Repeat("a", MaxADFieldBytes)
	if _, err := k.Seal(AD{Session: max, ID: max, Direction: FromDevice}, nil); err != nil {
		t.Errorf("fields of MaxADFieldBytes refused: %v", err)
	}
}

// TestADUnambiguous: the encoding keeps the fields apart, so moving bytes
// from one field to the other is a different AD.
func TestADUnambiguous(t *testing.T) {
	a, _ := AD{Session: "ab", ID: "c", Direction: FromMachine}.bytes()
	b, _ := AD{Session: "a", ID: "bc", Direction: FromMachine}.bytes()
	if bytes.Equal(a, b) {
		t.Fatal("two ADs encode alike")
	}
	want := append([]byte("ccrelay/seal/v1\x00\x01\x01\x02ab\x01c"), nil...)
	if !bytes.Equal(a, want) {
		t.Fatalf("AD bytes %q, want %q (docs/security.md and seal.js spell this out)", a, want)
	}
}
