package testutil

import (
	"bytes"
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
		req, err := http.NewRequest("POST", base+path, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", path, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	var code struct{ Code string }
	post("/api/pair", token, map[string]any{"role": role}, &code)
	var red struct{ ID, Credential string }
	post("/api/pair/redeem", "", map[string]any{"code": code.Code, "name": name, "publicKey": publicKey}, &red)
	return red.ID, red.Credential
}
