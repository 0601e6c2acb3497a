package seal

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzOpen: any text given to Open is refused with one of the package's
// errors or, if it opens, it is exactly what was sealed; it never panics.
func FuzzOpen(f *testing.F) {
	k, err := SessionKeyFromBytes(bytes.Repeat([]byte{7}, KeySize))
	if err != nil {
		f.Fatal(err)
	}
	ad := AD{Session: testSession, ID: testEnvID, Direction: FromMachine}
	good, _ := k.Seal(ad, []byte("hello"))
	for _, s := range []string{good, "", "AQ", good[:len(good)-2], "=", good + "=="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pt, err := k.Open(ad, s)
		if err != nil {
			if pt != nil || !(errors.Is(err, ErrOpen) || errors.Is(err, ErrMalformed) || errors.Is(err, ErrVersion)) {
				t.Fatalf("Open: %v with %d bytes", err, len(pt))
			}
			return
		}
		// Fuzzing workers seal their own value (the nonce is random): what
		// opens must be such a value, canonical text of "hello".
		raw, _ := DecodeSealed(s)
		if string(pt) != "hello" || b64.EncodeToString(raw) != s {
			t.Fatalf("forged text %q opened to %q", s, pt)
		}
	})
}

// FuzzDecodeSealed: decoding and re-encoding gives the text back.
func FuzzDecodeSealed(f *testing.F) {
	f.Add("AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	f.Add("")
	f.Add("Ag")
	f.Fuzz(func(t *testing.T, s string) {
		raw, err := DecodeSealed(s)
		if err != nil {
			return
		}
		if (raw[0] != Version && raw[0] != VersionEpoch) || len(raw) < Overhead {
			t.Fatalf("accepted framing: version %d, %d bytes", raw[0], len(raw))
		}
		if b64.EncodeToString(raw) != s {
			t.Fatalf("%q decodes to bytes that encode otherwise", s)
		}
	})
}

// FuzzUnwrapKey: no wrapped text opens unless the machine made it.
func FuzzUnwrapKey(f *testing.F) {
	machine, device := newKeyPair(f), newKeyPair(f)
	good, err := WrapKey(machine, device.Public(), testSession, newKey(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add("")
	f.Add(good[:len(good)-1] + "B")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := UnwrapKey(device, machine.Public(), testSession, s)
		if err == nil && s != good {
			t.Fatalf("unwrapped %q, which the machine did not make", s)
		}
		if err != nil && k != nil {
			t.Fatal("a key with an error")
		}
	})
}

func FuzzParseKeyFile(f *testing.F) {
	f.Add([]byte(keyFileHeader + "\n" + b64.EncodeToString(make([]byte, 32)) + "\n"))
	f.Add([]byte(""))
	f.Add([]byte(keyFileHeader + "\n"))
	f.Add(make([]byte, PrivateKeySize))
	f.Fuzz(func(t *testing.T, body []byte) {
		k, err := parseKeyFile(body)
		if err == nil && k.Private() == nil {
			t.Fatal("no key and no error")
		}
	})
}

func FuzzParsePublicKey(f *testing.F) {
	f.Add(b64.EncodeToString(make([]byte, 32)))
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		pub, err := ParsePublicKey(s)
		if err == nil && EncodePublicKey(pub) != s {
			t.Fatalf("%q parses to a key that encodes as %q", s, EncodePublicKey(pub))
		}
	})
}

// FuzzUnwrapKeys: no key set opens unless the machine made it.
func FuzzUnwrapKeys(f *testing.F) {
	machine, device := newKeyPair(f), newKeyPair(f)
	good, err := WrapKeys(machine, device.Public(), testSession, []*SessionKey{newKey(f), newKey(f)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add("")
	f.Add(good[:len(good)-43])
	f.Add(good[:len(good)-1] + "B")
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := UnwrapKeys(device, machine.Public(), testSession, s)
		if err == nil && s != good {
			t.Fatalf("unwrapped %q, which the machine did not make", s)
		}
		if err != nil && keys != nil {
			t.Fatal("keys with an error")
		}
	})
}
