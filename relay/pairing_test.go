package relay

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func newCode(t *testing.T, r *testRelay, role string) string {
	t.Helper()
	code, b := api(t, r.srv, "POST", "/api/pair", testToken, pairRequest{Role: role, MachineKey: []byte("k")})
	if code != 200 {
		t.Fatalf("pair: %d %s", code, b)
	}
	var pa pairAnswer
	json.Unmarshal(b, &pa)
	if len(pa.Code) != PairCodeLen || pa.URL != r.srv.URL {
		t.Fatalf("%+v", pa)
	}
	return pa.Code
}

func redeem(t *testing.T, r *testRelay, code string) (int, string) {
	t.Helper()
	st, b := api(t, r.srv, "POST", "/api/pair/redeem", "", redeemRequest{Code: code, Name: "phone"})
	return st, string(b)
}

// A pairing code works once, within PairCodeTTL; a wrong one is refused,
// and each says so plainly.
func TestPairingCodes(t *testing.T) {
	r := startTestRelay(t)
	clock := &fakeNow{t: time.Unix(1_800_000_000, 0)}
	r.relay.now = clock.now

	code := newCode(t, r, RoleDevice)
	// Typed by hand: lower case, with a dash, O for 0.
	typed := strings.ToLower(code[:5] + "-" + code[5:])
	typed = strings.ReplaceAll(typed, "0", "o")
	st, b := redeem(t, r, typed)
	var ra redeemAnswer
	if json.Unmarshal([]byte(b), &ra); st != 200 || ra.Role != RoleDevice || string(ra.MachineKey) != "k" {
		t.Fatalf("redeem: %d %s", st, b)
	}
	for _, tc := range []struct {
		name string
		code func() string
		want string
	}{
		{"reused", func() string { return code }, "already used"},
		{"expired", func() string {
			c := newCode(t, r, RoleDevice)
			clock.advance(PairCodeTTL)
			return c
		}, "expired"},
		{"wrong", func() string { return "ABCDEFGHJK" }, "wrong pairing code"},
		{"short", func() string { return "ABC" }, fmt.Sprintf("has %d letters", PairCodeLen)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, b := redeem(t, r, tc.code())
			if st != http.StatusForbidden || !strings.Contains(b, tc.want) || !strings.Contains(b, "ccrelay pair") {
				t.Errorf("%d %q", st, b)
			}
		})
	}
	// A machine code makes a machine.
	st, b = redeem(t, r, newCode(t, r, RoleMachine))
	if json.Unmarshal([]byte(b), &ra); st != 200 || ra.Role != RoleMachine {
		t.Fatalf("machine code: %d %s", st, b)
	}
}

// Guessing is limited twice: one address gets 429 after LoginFailures
// wrong codes; PairGuessLimit wrong codes from anywhere void every code
// outstanding, so spreading guesses over addresses does not help.
func TestPairingGuessesLimited(t *testing.T) {
	r := startTestRelay(t)
	clock := &fakeNow{t: time.Unix(1_800_000_000, 0)}
	r.relay.now = clock.now
	code := newCode(t, r, RoleDevice)
	for i := range DefaultLoginFailures {
		if st, b := redeem(t, r, "ZZZZZZZZZZ"); st != http.StatusForbidden {
			t.Fatalf("guess %d: %d %s", i, st, b)
		}
	}
	if st, b := redeem(t, r, code); st != http.StatusTooManyRequests {
		t.Fatalf("after %d wrong codes: %d %s", DefaultLoginFailures, st, b)
	}
	clock.advance(DefaultLoginWindow + time.Second)
	// The right code still works once the address may try again...
	if st, b := redeem(t, r, code); st != 200 {
		t.Fatalf("right code: %d %s", st, b)
	}
	// ...but enough wrong codes in all void every open code. (The
	// per-address limit is lifted here to stand for many addresses.)
	r.relay.Limits.LoginFailures = 1000
	clock.advance(PairCodeTTL) // the first wrong codes no longer count
	code = newCode(t, r, RoleDevice)
	var last string
	for range PairGuessLimit {
		_, last = redeem(t, r, "ZZZZZZZZZZ")
	}
	if !strings.Contains(last, "cancelled") {
		t.Errorf("last wrong code: %q", last)
	}
	if st, b := redeem(t, r, code); st != http.StatusForbidden || !strings.Contains(b, "cancelled") {
		t.Errorf("a voided code: %d %s", st, b)
	}
	if !strings.Contains(r.log.String(), "pairing code refused") {
		t.Error("wrong codes are not logged")
	}
}

// At most MaxPendingCodes codes are open at once: the oldest goes first.
func TestPendingCodesBounded(t *testing.T) {
	r := startTestRelay(t)
	first := newCode(t, r, RoleDevice)
	for range MaxPendingCodes {
		newCode(t, r, RoleDevice)
	}
	if st, b := redeem(t, r, first); st != http.StatusForbidden {
		t.Errorf("oldest code: %d %s", st, b)
	}
}

// An account with MaxCredentials machines and devices cannot pair one more:
// the code is answered 409 with what to do, not a server error.
func TestPairingBeyondCredentialLimit(t *testing.T) {
	r := startTestRelay(t)
	account := r.relay.tokens[testToken]
	for i := range MaxCredentials {
		if _, _, err := r.relay.store.AddCredential(t.Context(), account, RoleDevice, fmt.Sprint("d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	st, b := redeem(t, r, newCode(t, r, RoleDevice))
	if st != http.StatusConflict || !strings.Contains(b, "revoke some first") {
		t.Fatalf("%d %q", st, b)
	}
}

// pairResult asks GET /api/pair/result for code, as ccrelay pair does.
func pairResult(t *testing.T, r *testRelay, code string) (int, string) {
	t.Helper()
	st, b := api(t, r.srv, "GET", "/api/pair/result?code="+code, testToken, nil)
	return st, string(b)
}

// Between a code's redemption and the record of what it made (the
// device's credential is being made), the machine asking for the result is
// told to ask again, not that the code was cancelled: ccrelay pair, asking
// every 0.5 s, failed now and then with "this pairing code was
// cancelled" while the phone paired. A redemption that fails after the
// code was spent (too many credentials) cancels it at once.
func TestPairResultWhileRedeeming(t *testing.T) {
	r := startTestRelay(t)
	code := newCode(t, r, RoleDevice)
	if _, err := r.relay.pairing.redeem(t.Context(), code); err != nil {
		t.Fatal(err)
	}
	if st, b := pairResult(t, r, code); st != http.StatusAccepted {
		t.Fatalf("redeemed, result not yet recorded: %d %q, want 202", st, b)
	}
	if err := r.relay.pairing.setResult(t.Context(), code, PairResult{ID: "c1", Name: "phone", Role: RoleDevice}); err != nil {
		t.Fatal(err)
	}
	if st, b := pairResult(t, r, code); st != http.StatusOK || !strings.Contains(b, `"name":"phone"`) {
		t.Fatalf("result recorded: %d %q", st, b)
	}

	account := r.relay.tokens[testToken]
	for i := range MaxCredentials {
		if _, _, err := r.relay.store.AddCredential(t.Context(), account, RoleDevice, fmt.Sprint("d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	code = newCode(t, r, RoleDevice)
	if st, b := redeem(t, r, code); st != http.StatusConflict {
		t.Fatalf("redeem beyond the limit: %d %q", st, b)
	}
	if st, b := pairResult(t, r, code); st == http.StatusAccepted || st == http.StatusOK {
		t.Fatalf("a redemption that failed: %d %q, want an end", st, b)
	}
}
