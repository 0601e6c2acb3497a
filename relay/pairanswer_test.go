package relay

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// pairResultOf is what GET /api/pair/result tells the relay token of code.
func pairResultOf(t *testing.T, r *testRelay, code string) PairResult {
	t.Helper()
	st, b := api(t, r.srv, "GET", "/api/pair/result?code="+code, testToken, nil)
	var res PairResult
	if st != http.StatusOK || json.Unmarshal(b, &res) != nil {
		t.Fatalf("result: %d %s", st, b)
	}
	return res
}

// pairCodeFor asks the relay token for a device code.
func pairCodeFor(t *testing.T, r *testRelay) string {
	t.Helper()
	st, b := api(t, r.srv, "POST", "/api/pair", testToken, pairRequest{Role: RoleDevice, MachineKey: bytes.Repeat([]byte{7}, 32)})
	var pa pairAnswer
	if st != http.StatusOK || json.Unmarshal(b, &pa) != nil {
		t.Fatalf("pair: %d %s", st, b)
	}
	return pa.Code
}

// The device that redeemed a code answers its pairing once, for the machine
// to read: an acceptance is passed on as it came; a refusal (its text
// without control characters) revokes the device's credential at once.
// Nobody else may answer: another device, the relay token, a second answer,
// an answer with both or neither.
func TestPairAnswer(t *testing.T) {
	r := startTestRelay(t)
	code := pairCodeFor(t, r)
	st, b := api(t, r.srv, "POST", "/api/pair/redeem", "", redeemRequest{Code: code, Name: "phone", PublicKey: bytes.Repeat([]byte{1}, 32), Confirm: bytes.Repeat([]byte{9}, 32)})
	var ra redeemAnswer
	if st != http.StatusOK || json.Unmarshal(b, &ra) != nil {
		t.Fatalf("redeem: %d %s", st, b)
	}
	otherCred, _ := pairDevice(t, r, "other", bytes.Repeat([]byte{2}, 32))
	accepted := bytes.Repeat([]byte{5}, 32)
	for _, c := range []struct {
		name, cred string
		body       answerRequest
		want       int
	}{
		{"another device", otherCred, answerRequest{Code: code, Accepted: accepted}, http.StatusNotFound},
		{"the relay token", testToken, answerRequest{Code: code, Accepted: accepted}, http.StatusNotFound},
		{"neither", ra.Credential, answerRequest{Code: code}, http.StatusBadRequest},
		{"both", ra.Credential, answerRequest{Code: code, Accepted: accepted, Refused: "no"}, http.StatusBadRequest},
		{"another code", ra.Credential, answerRequest{Code: "0000000000", Accepted: accepted}, http.StatusNotFound},
	} {
		if st, b := api(t, r.srv, "POST", "/api/pair/answer", c.cred, c.body); st != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, st, b, c.want)
		}
	}
	if res := pairResultOf(t, r, code); res.Accepted != nil || res.Refused != "" {
		t.Fatalf("answered by another: %+v", res)
	}
	if st, b := api(t, r.srv, "POST", "/api/pair/answer", ra.Credential, answerRequest{Code: code, Accepted: accepted}); st != http.StatusOK {
		t.Fatalf("accept: %d %s", st, b)
	}
	if res := pairResultOf(t, r, code); !bytes.Equal(res.Accepted, accepted) {
		t.Fatalf("result after acceptance: %+v", res)
	}
	if st, _ := api(t, r.srv, "POST", "/api/pair/answer", ra.Credential, answerRequest{Code: code, Refused: "changed my mind"}); st != http.StatusNotFound {
		t.Fatalf("a second answer: %d", st)
	}

	// A refusal.
	code = pairCodeFor(t, r)
	st, b = api(t, r.srv, "POST", "/api/pair/redeem", "", redeemRequest{Code: code, Name: "tablet", PublicKey: bytes.Repeat([]byte{3}, 32), Confirm: bytes.Repeat([]byte{9}, 32)})
	if st != http.StatusOK || json.Unmarshal(b, &ra) != nil {
		t.Fatalf("redeem: %d %s", st, b)
	}
	if st, b := api(t, r.srv, "POST", "/api/pair/answer", ra.Credential, answerRequest{Code: code, Refused: "another\x1b[31m machine\u202ekey"}); st != http.StatusOK {
		t.Fatalf("refuse: %d %s", st, b)
	}
	if res := pairResultOf(t, r, code); res.Refused != "another [31m machine key" || res.Accepted != nil {
		t.Fatalf("result after refusal: %q", res.Refused)
	}
	if st, _ := api(t, r.srv, "GET", "/api/me", ra.Credential, nil); st != http.StatusUnauthorized {
		t.Fatalf("the refusing device's credential still works: %d", st)
	}
	st, b = api(t, r.srv, "GET", "/api/devices", testToken, nil)
	if st != http.StatusOK || strings.Contains(string(b), `"tablet"`) {
		t.Fatalf("devices after a refusal: %d %s", st, b)
	}
}
