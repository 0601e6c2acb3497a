package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// api calls a JSON endpoint of the relay with credential cred and returns
// the status and body.
func api(t *testing.T, srv *httptest.Server, method, path, cred string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// pairAs asks for a code with cred (a machine's or the relay token) and
// redeems it as name, returning the new credential.
func pairAs(t *testing.T, srv *httptest.Server, cred, role, name string) string {
	t.Helper()
	code, b := api(t, srv, "POST", "/api/pair", cred, pairRequest{Role: role})
	if code != http.StatusOK {
		t.Fatalf("pair: %d %s", code, b)
	}
	var pa pairAnswer
	json.Unmarshal(b, &pa)
	code, b = api(t, srv, "POST", "/api/pair/redeem", "", redeemRequest{Code: pa.Code, Name: name})
	if code != http.StatusOK {
		t.Fatalf("redeem: %d %s", code, b)
	}
	var ra redeemAnswer
	json.Unmarshal(b, &ra)
	if ra.Role != role || ra.Name != name || !strings.HasPrefix(ra.Credential, credentialPrefix) {
		t.Fatalf("redeemed %+v", ra)
	}
	return ra.Credential
}

func dialStatus(t *testing.T, srv *httptest.Server, cred, path string) (*websocket.Conn, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, wsURL(srv, path), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + cred}}})
	if err != nil {
		if resp == nil {
			t.Fatal(err)
		}
		return nil, resp.StatusCode
	}
	t.Cleanup(func() { c.CloseNow() })
	return c, http.StatusSwitchingProtocols
}

// Each credential is bound to its role: a device cannot write envelopes
// (/ws/cli) or make pairing codes; a machine cannot read sessions or send
// commands (/ws/app, /status).
func TestRolesBound(t *testing.T) {
	r := startTestRelay(t)
	machine := pairAs(t, r.srv, testToken, RoleMachine, "laptop")
	device := pairAs(t, r.srv, testToken, RoleDevice, "iPhone")
	for _, tc := range []struct {
		name, cred, path string
		want             int
	}{
		{"device on the CLI endpoint", device, "/ws/cli", http.StatusForbidden},
		{"machine on the app endpoint", machine, "/ws/app", http.StatusForbidden},
		{"machine", machine, "/ws/cli", http.StatusSwitchingProtocols},
		{"device", device, "/ws/app", http.StatusSwitchingProtocols},
		{"relay token as a CLI", testToken, "/ws/cli", http.StatusSwitchingProtocols},
		{"relay token as an app", testToken, "/ws/app", http.StatusSwitchingProtocols},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := dialStatus(t, r.srv, tc.cred, tc.path); got != tc.want {
				t.Errorf("status %d, want %d", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name, method, path, cred string
		want                     int
	}{
		{"machine on /status", "GET", "/status", machine, http.StatusForbidden},
		{"device on /status", "GET", "/status", device, http.StatusOK},
		{"device makes a pairing code", "POST", "/api/pair", device, http.StatusForbidden},
		{"device lists devices", "GET", "/api/devices", device, http.StatusForbidden},
		{"device revokes", "POST", "/api/devices/revoke", device, http.StatusForbidden},
		{"device asks who it is", "GET", "/api/me", device, http.StatusOK},
		{"unknown credential", "GET", "/api/me", credentialPrefix + "00", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.method == "POST" {
				body = map[string]string{}
			}
			if got, b := api(t, r.srv, tc.method, tc.path, tc.cred, body); got != tc.want {
				t.Errorf("status %d, want %d (%s)", got, tc.want, b)
			}
		})
	}
	// A device's envelopes never reach the store: it cannot even connect.
	if n := sessionCount(t, r.store); n != 0 {
		t.Errorf("%d sessions", n)
	}
	// The store holds hashes only.
	var n int
	r.store.w.QueryRow(`SELECT COUNT(*) FROM credentials WHERE hash = ? OR hash = ?`, []byte(machine), []byte(device)).Scan(&n)
	if n != 0 {
		t.Error("a credential is stored as itself")
	}
	if code, b := api(t, r.srv, "GET", "/api/me", device, nil); code != 200 || !strings.Contains(string(b), `"name":"iPhone"`) || !strings.Contains(string(b), `"role":"device"`) {
		t.Errorf("/api/me: %d %s", code, b)
	}
}

// closedWithin waits for c to be closed by the relay and returns the close
// code and how long it took.
func closedWithin(t *testing.T, c *websocket.Conn, limit time.Duration) (websocket.StatusCode, time.Duration) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for {
		_, _, err := c.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("still open after %v", limit)
			}
			return websocket.CloseStatus(err), time.Since(start)
		}
	}
}

// Revoking a device closes its open app connection within a second and it
// cannot reconnect; revoking a machine closes its CLI connection and its
// envelopes are refused; other devices and machines go on.
func TestRevocation(t *testing.T) {
	r := startTestRelay(t)
	machine := pairAs(t, r.srv, testToken, RoleMachine, "laptop")
	other := pairAs(t, r.srv, testToken, RoleMachine, "desktop")
	phone := pairAs(t, r.srv, testToken, RoleDevice, "iPhone")
	tablet := pairAs(t, r.srv, testToken, RoleDevice, "iPad")

	cli, _ := dialStatus(t, r.srv, machine, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`{}`)})
	if f := recv(t, cli); f.Type != protocol.FrameAck {
		t.Fatalf("%+v", f)
	}
	otherCLI, _ := dialStatus(t, r.srv, other, "/ws/cli")
	phoneApp, _ := dialStatus(t, r.srv, phone, "/ws/app")
	tabletApp, _ := dialStatus(t, r.srv, tablet, "/ws/app")

	// The machine lists what it knows.
	code, b := api(t, r.srv, "GET", "/api/devices", machine, nil)
	var list []Credential
	if json.Unmarshal(b, &list); code != 200 || len(list) != 4 || list[0].Role != RoleMachine || list[3].Role != RoleDevice {
		t.Fatalf("devices: %d %s", code, b)
	}
	if list[0].LastSeen == 0 || list[0].LastAddr == "" {
		t.Errorf("last seen not recorded: %+v", list[0])
	}

	if code, b := api(t, r.srv, "POST", "/api/devices/revoke", machine, renameRequest{Name: "iPhone"}); code != 200 {
		t.Fatalf("revoke: %d %s", code, b)
	}
	st, took := closedWithin(t, phoneApp, time.Second)
	if st != StatusRevoked {
		t.Errorf("close status %v", st)
	}
	t.Logf("revoked app closed after %v", took)
	if _, got := dialStatus(t, r.srv, phone, "/ws/app"); got != http.StatusUnauthorized {
		t.Errorf("revoked device reconnects: %d", got)
	}
	// The tablet is unaffected.
	send(t, tabletApp, protocol.Frame{Type: protocol.FrameList})
	if f := recv(t, tabletApp); f.Type != protocol.FrameSessions || len(f.Sessions) != 1 {
		t.Fatalf("tablet: %+v", f)
	}

	// Revoking a machine: its CLI is closed, its envelopes refused.
	if code, b := api(t, r.srv, "POST", "/api/devices/revoke", other, renameRequest{Name: "laptop"}); code != 200 {
		t.Fatalf("revoke: %d %s", code, b)
	}
	if st, _ := closedWithin(t, cli, time.Second); st != StatusRevoked {
		t.Errorf("CLI close status %v", st)
	}
	if _, got := dialStatus(t, r.srv, machine, "/ws/cli"); got != http.StatusUnauthorized {
		t.Errorf("revoked machine reconnects: %d", got)
	}
	// The other machine still writes.
	send(t, otherCLI, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s2, Envelopes: []json.RawMessage{envelopeJSON(textEnvelope(protocol.DeriveID("x"), "hi"))}})
	if f := recv(t, otherCLI); f.Type != protocol.FrameAck {
		t.Fatalf("other machine: %+v", f)
	}
	// A revoked name is gone; revoking it again says so.
	if code, _ := api(t, r.srv, "POST", "/api/devices/revoke", other, renameRequest{Name: "iPhone"}); code != http.StatusNotFound {
		t.Errorf("second revoke: %d", code)
	}

	// Sign out: the tablet revokes itself.
	if code, b := api(t, r.srv, "POST", "/api/me/signout", tablet, map[string]string{}); code != 200 {
		t.Fatalf("sign out: %d %s", code, b)
	}
	if st, _ := closedWithin(t, tabletApp, time.Second); st != StatusRevoked {
		t.Errorf("tablet close status %v", st)
	}
}

// Rename: by a machine (any name) and by a device (its own); names are
// cleaned and stay unique.
func TestRename(t *testing.T) {
	r := startTestRelay(t)
	machine := pairAs(t, r.srv, testToken, RoleMachine, "laptop")
	phone := pairAs(t, r.srv, testToken, RoleDevice, "iPhone")
	if code, b := api(t, r.srv, "POST", "/api/devices/rename", machine, renameRequest{Name: "iPhone", To: "  Ann's\tphone "}); code != 200 || !strings.Contains(string(b), `"Ann's phone"`) {
		t.Fatalf("rename: %d %s", code, b)
	}
	if code, _ := api(t, r.srv, "POST", "/api/me/rename", phone, renameRequest{To: "laptop"}); code != http.StatusBadRequest {
		t.Errorf("a taken name: %d", code)
	}
	if code, b := api(t, r.srv, "POST", "/api/me/rename", phone, renameRequest{To: strings.Repeat("x", 100)}); code != 200 || !strings.Contains(string(b), `"`+strings.Repeat("x", MaxCredentialName)+`"`) {
		t.Errorf("long name: %d %s", code, b)
	}
	// The same name paired twice gets a number.
	pairAs(t, r.srv, testToken, RoleMachine, "desktop")
	code, b := api(t, r.srv, "POST", "/api/pair", machine, pairRequest{Role: RoleMachine})
	var pa pairAnswer
	json.Unmarshal(b, &pa)
	code, b = api(t, r.srv, "POST", "/api/pair/redeem", "", redeemRequest{Code: pa.Code, Name: "desktop"})
	if code != 200 || !strings.Contains(string(b), `"name":"desktop 2"`) {
		t.Errorf("a second desktop: %d %s", code, b)
	}
}

// Sessions belong to the account: after every credential is rotated (new
// machine and device, old ones revoked, a new relay token), every session
// is still listed; sessions the relay token owned before accounts existed
// move to the default account.
func TestRotationKeepsHistory(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "relay.db")
	st := openTestStore(t, path)
	// A database from before accounts: the old token's sessions, keyed by
	// its hash, and a default account already made.
	if _, err := st.DefaultAccount(ctx, "acc0"); err != nil {
		t.Fatal(err)
	}
	if err := st.Claim(ctx, a1, OwnerID("old-token")); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func(token string) *httptest.Server {
		rs, err := New(ctx, st, quiet, token)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(rs.Handler())
		t.Cleanup(srv.Close)
		return srv
	}
	srv := start("old-token")
	machine := pairAs(t, srv, "old-token", RoleMachine, "laptop")
	phone := pairAs(t, srv, "old-token", RoleDevice, "iPhone")
	cli, _ := dialStatus(t, srv, machine, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`{}`)})
	recv(t, cli)
	cli.Close(websocket.StatusNormalClosure, "")
	list := func(srv *httptest.Server, cred string) int {
		app, code := dialStatus(t, srv, cred, "/ws/app")
		if code != http.StatusSwitchingProtocols {
			t.Fatalf("app: %d", code)
		}
		defer app.CloseNow()
		send(t, app, protocol.Frame{Type: protocol.FrameList})
		return len(recv(t, app).Sessions)
	}
	if n := list(srv, phone); n != 2 {
		t.Fatalf("before rotation: %d sessions", n)
	}
	// Rotate everything.
	machine2 := pairAs(t, srv, machine, RoleMachine, "laptop (new)")
	phone2 := pairAs(t, srv, machine2, RoleDevice, "iPhone (new)")
	for _, name := range []string{"laptop", "iPhone"} {
		if code, b := api(t, srv, "POST", "/api/devices/revoke", machine2, renameRequest{Name: name}); code != 200 {
			t.Fatalf("revoke %s: %d %s", name, code, b)
		}
	}
	srv.Close()
	srv = start("new-token")
	if n := list(srv, phone2); n != 2 {
		t.Errorf("after rotation: %d sessions", n)
	}
	if n := list(srv, "new-token"); n != 2 {
		t.Errorf("with the new relay token: %d sessions", n)
	}
	if _, code := dialStatus(t, srv, "old-token", "/ws/app"); code != http.StatusUnauthorized {
		t.Errorf("old token: %d", code)
	}
}

// The relay token is a bootstrap credential for this machine only: from
// another address, or through a proxy, it is refused with a message that
// says what to do instead.
func TestBootstrapTokenLoopbackOnly(t *testing.T) {
	r := startTestRelay(t)
	req, _ := http.NewRequest("GET", r.srv.URL+"/status", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// No proxy is trusted, so this is plain http from elsewhere: refused
	// before the token is looked at.
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "HTTPS") {
		t.Errorf("through an untrusted proxy: %d %s", resp.StatusCode, b)
	}
	// With the proxy trusted and https, the token is still this machine's
	// only.
	r.relay.Transport.Proxies, _ = ParseProxies("127.0.0.1")
	req.Header.Set("X-Forwarded-Proto", "https")
	resp, err = r.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "ccrelay pair") {
		t.Errorf("through a trusted proxy: %d %s", resp.StatusCode, b)
	}
	if !errors.Is(nil, nil) || !strings.Contains(r.log.String(), "203.0.113.9") {
		t.Errorf("the client's address is not logged: %s", r.log.String())
	}
}

// A name with bidirectional or other control characters is kept without
// them wherever the relay takes one: pairing, renaming (another credential
// or itself), and a plaintext session's machine in the lists.
func TestNamesDropControls(t *testing.T) {
	r := startTestRelay(t)
	code, b := api(t, r.srv, "POST", "/api/pair", testToken, pairRequest{Role: RoleDevice})
	if code != http.StatusOK {
		t.Fatalf("pair: %d %s", code, b)
	}
	var pa pairAnswer
	json.Unmarshal(b, &pa)
	code, b = api(t, r.srv, "POST", "/api/pair/redeem", "", redeemRequest{Code: pa.Code, Name: "Ann\u202e's \u2066phone\u2069\x1b[31m"})
	var ra redeemAnswer
	if json.Unmarshal(b, &ra); code != http.StatusOK || ra.Name != "Ann's phone [31m" {
		t.Fatalf("redeemed: %d %q", code, ra.Name)
	}
	if code, b := api(t, r.srv, "POST", "/api/devices/rename", testToken, renameRequest{Name: ra.Name, To: "pad\u200f\u061c\u202a"}); code != 200 || !strings.Contains(string(b), `"name":"pad"`) {
		t.Errorf("rename: %d %s", code, b)
	}
	if code, b := api(t, r.srv, "POST", "/api/me/rename", ra.Credential, renameRequest{To: "\u202dtablet\u202c"}); code != 200 || !strings.Contains(string(b), `"name":"tablet"`) {
		t.Errorf("rename itself: %d %s", code, b)
	}
	if code, b := api(t, r.srv, "POST", "/api/me/rename", ra.Credential, renameRequest{To: "\u202e\u2067"}); code != http.StatusBadRequest {
		t.Errorf("a name of controls only: %d %s", code, b)
	}
	cli := r.dial(t, testToken, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`{"mode":"local","machine":"lap\u202etop"}`)})
	if f := recv(t, cli); f.Type != protocol.FrameAck {
		t.Fatalf("announce: %+v", f)
	}
	_, b = api(t, r.srv, "GET", "/sessions", testToken, nil)
	if !strings.Contains(string(b), `"machine":"laptop"`) || strings.Contains(string(b), `\u202e`) || strings.Contains(string(b), "\u202e") {
		t.Errorf("sessions: %s", b)
	}
}
