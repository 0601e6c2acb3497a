package testutil

import (
	"encoding/json"
	"net/http"
	"testing"
)

// PairDevice pairs a device at the relay at base: it asks for a code with
// the relay's token and redeems it as name with the device's X25519
// public key, as the app does. It returns the device's credential id and
// its credential.
func PairDevice(t testing.TB, base, token, name string, publicKey []byte) (id, credential string) {
	t.Helper()
	return PairCredential(t, base, token, "device", name, publicKey)
}

// PairCredential is PairDevice for a role: "device" or "machine".
func PairCredential(t testing.TB, base, token, role, name string, publicKey []byte) (id, credential string) {
	t.Helper()
	post := func(path, auth string, in, out any) {
		t.Helper()
		b, _ := json.Marshal(in)
		status, body := Request(t, "POST", base+path, auth, b)
		if status != http.StatusOK {
			t.Fatalf("%s: %d %s", path, status, body)
		}
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	var code struct{ Code string }
	post("/api/pair", token, map[string]any{"role": role}, &code)
	var red struct{ ID, Credential string }
	post("/api/pair/redeem", "", map[string]any{"code": code.Code, "name": name, "publicKey": publicKey}, &red)
	return red.ID, red.Credential
}
