package main

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/seal"
	"github.com/chromedp/chromedp"
)

// credentialNames lists the names of the account's credentials on the relay.
func credentialNames(t *testing.T, base, token string) []string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/devices", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list []struct{ Name string }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("devices: %d %v", resp.StatusCode, err)
	}
	var names []string
	for _, c := range list {
		names = append(names, c.Name)
	}
	return names
}

// pairAsApp does with a pairing link what the app does: it redeems the code
// with its key and confirmation, checks that the relay's answer names the
// machine key of the link, and answers the pairing: accepted (its tag over
// the keys it checked) or refused. It reports whether it accepted.
func pairAsApp(t *testing.T, base, link string, device *seal.KeyPair) bool {
	t.Helper()
	p, status, a := redeemLink(t, base, link, device, nil)
	if status != http.StatusOK {
		t.Fatalf("redeem: %d", status)
	}
	if !bytes.Equal(a.MachineKey, p.machineKey) {
		if st, b := answerPairing(t, base, a.Credential, map[string]any{"code": p.code, "refused": "the relay passed on another machine key than the pairing link names"}); st != http.StatusOK {
			t.Fatalf("refuse: %d %s", st, b)
		}
		return false
	}
	accepted, _ := base64.RawURLEncoding.DecodeString(seal.ConfirmTag(p.confirm, seal.RoleDeviceAccepted, p.machine, device.Public()))
	if st, b := answerPairing(t, base, a.Credential, map[string]any{"code": p.code, "accepted": accepted}); st != http.StatusOK {
		t.Fatalf("accept: %d %s", st, b)
	}
	return true
}

// tamper is what a tampering relay changes.
type tamper struct {
	swap  *ecdh.PublicKey // the machine key of a redemption's answer
	asked *ecdh.PublicKey // the machine key a code is asked for with
	forge bool            // drop the device's acceptance and make one up in the pairing's result
	// reflect: drop the device's acceptance and pass its confirmation
	// (made at redemption) on as the acceptance
	reflect bool
}

// tamperingRelay puts a relay that changes what it passes on (tp) in front
// of base.
func tamperingRelay(t *testing.T, base string, tp tamper) string {
	swap, forge := tp.swap, tp.forge || tp.reflect
	t.Helper()
	u, _ := url.Parse(base)
	// Rewrite (not Director) adds no X-Forwarded-For: the relay takes
	// the requests as from this machine, as a relay of its own would.
	p := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u) }}
	p.ModifyResponse = func(resp *http.Response) error {
		path := resp.Request.URL.Path
		rewrite := func(f func(map[string]any)) error {
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			var v map[string]any
			if json.Unmarshal(b, &v) == nil {
				f(v)
				b, _ = json.Marshal(v)
			}
			resp.Body = io.NopCloser(bytes.NewReader(b))
			resp.ContentLength = int64(len(b))
			resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
			return nil
		}
		switch {
		case path == "/api/pair/redeem" && swap != nil && resp.StatusCode == http.StatusOK:
			return rewrite(func(v map[string]any) { v["machineKey"] = swap.Bytes() })
		case path == "/api/pair/result" && forge && resp.StatusCode == http.StatusOK:
			fake := make([]byte, 32)
			rand.Read(fake)
			return rewrite(func(v map[string]any) {
				if v["accepted"] = fake; tp.reflect {
					v["accepted"] = v["confirm"]
				}
			})
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if k := tp.asked; k != nil && r.URL.Path == "/api/pair" {
			var v map[string]any
			b, _ := io.ReadAll(r.Body)
			json.Unmarshal(b, &v)
			v["machineKey"] = k.Bytes()
			b, _ = json.Marshal(v)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		}
		if forge && r.URL.Path == "/api/pair/answer" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"accepted":true}`)
			return
		}
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Both ends of a pairing agree. A relay that passes the phone another
// machine key than the link's: the phone refuses, and ccrelay pair says the
// pairing failed (it used to say "its key is confirmed" and trust the
// phone); a relay that drops the phone's acceptance and makes one up: the
// made-up one does not match, and the pairing fails. Either way the phone is
// not trusted and the relay keeps no credential for it. An honest relay:
// trusted, credential kept.
func TestPairingBothEndsAgree(t *testing.T) {
	mallory, _ := seal.GenerateKeyPair()
	for _, c := range []struct {
		name     string
		swap     *ecdh.PublicKey
		forge    bool
		reflect  bool
		accepts  bool
		paired   bool
		stderr   string
		keptCred bool
	}{
		{name: "honest relay", accepts: true, paired: true, keptCred: true},
		{name: "relay swaps the machine key", swap: mallory.Public(), stderr: "refused this machine's key"},
		{name: "relay makes up the acceptance", forge: true, accepts: true, stderr: "acceptance of this machine's key does not match"},
		{name: "relay passes the confirmation as the acceptance", reflect: true, accepts: true, stderr: "acceptance of this machine's key does not match"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data, state := t.TempDir(), t.TempDir()
			serve, base, token := startServe(t, data)
			defer func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() }()
			relayURL := tamperingRelay(t, base, tamper{swap: c.swap, forge: c.forge, reflect: c.reflect})
			phone, _ := seal.GenerateKeyPair()
			link, wait := pairWaiting(t, relayURL, data, state)
			if got := pairAsApp(t, relayURL, link, phone); got != c.accepts {
				t.Fatalf("the phone accepted: %v, want %v", got, c.accepts)
			}
			res := wait()
			_, statErr := os.Stat(filepath.Join(state, apiclient.TrustedDevicesFile))
			kept := slices.Contains(credentialNames(t, base, token), "phone")
			if c.paired {
				if res.code != 0 || !strings.Contains(res.stdout, "its key is confirmed") || statErr != nil {
					t.Fatalf("pair: %+v (trusted devices: %v)", res, statErr)
				}
			} else {
				if res.code == 0 || strings.Contains(res.stdout, "confirmed") || !strings.Contains(res.stderr, "failed") || !strings.Contains(res.stderr, c.stderr) {
					t.Fatalf("pair: %+v", res)
				}
				if !os.IsNotExist(statErr) {
					t.Fatalf("a device was trusted: %v", statErr)
				}
				if !strings.Contains(res.stderr, "credential for it was removed") {
					t.Errorf("pair does not say the credential was removed: %q", res.stderr)
				}
			}
			if kept != c.keptCred {
				t.Fatalf("the relay keeps the phone's credential: %v, want %v", kept, c.keptCred)
			}
		})
	}
}

// The case in the app: a relay passes the phone another machine key
// than the link's. The app refuses and keeps nothing, and ccrelay pair,
// told so, says the pairing failed; the relay keeps no credential for it.
func TestAppPairingBothEndsAgree(t *testing.T) {
	r := startAppRelay(t)
	mallory, _ := seal.GenerateKeyPair()
	// The machine's request for a code reaches the relay with another
	// key, which the relay then passes on to the phone: the same as a relay
	// that swaps the key.
	proxy := tamperingRelay(t, r.base, tamper{asked: mallory.Public()})
	state := t.TempDir()
	link, wait := pairWaiting(t, proxy, r.data, state)
	ctx := newBrowser(t)
	must(t, ctx, phone(), chromedp.Navigate(r.base+link[strings.Index(link, "/#pair="):]))
	waitJS(t, ctx, "the pairing page", `!!document.querySelector('.pair-form')`)
	must(t, ctx, chromedp.SetValue(chromedp.CSS("input.pair-name"), "phone"), chromedp.Click(chromedp.CSS(".pair-form button")))
	waitJS(t, ctx, "the refusal", `(() => { const e = document.querySelector('.pair-error'); return !!e && !e.hidden && e.textContent.includes("changed the machine's key") })()`)
	res := wait()
	if res.code == 0 || strings.Contains(res.stdout, "confirmed") || !strings.Contains(res.stderr, "refused this machine's key") {
		t.Fatalf("pair: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(state, apiclient.TrustedDevicesFile)); !os.IsNotExist(err) {
		t.Fatalf("a device was trusted: %v", err)
	}
	if names := credentialNames(t, r.base, r.token); slices.Contains(names, "phone") {
		t.Fatalf("the relay keeps the phone's credential: %v", names)
	}
	if tok := eval[string](t, ctx, `localStorage.getItem('ccrelay.token') || ''`); tok != "" {
		t.Errorf("the app kept a credential: %.8q…", tok)
	}
}

// A device that redeems the code with a matching confirmation but never
// answers (an app too old to, or closed at once) is not trusted: once
// pairAnswerWait has passed, the pairing failed and its credential is gone
// from the relay.
func TestPairingFailsWithoutTheDevicesAnswer(t *testing.T) {
	data, state := t.TempDir(), t.TempDir()
	serve, base, token := startServe(t, data)
	defer func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() }()
	old := pairAnswerWait
	pairAnswerWait = 2 * time.Second
	defer func() { pairAnswerWait = old }()
	key, err := machineKey(state)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := apiclient.OpenKeyring(state, key)
	if err != nil {
		t.Fatal(err)
	}
	var ans struct{ Code string }
	if err := relayCall(t.Context(), "POST", base+"/api/pair", token, map[string]any{"role": "device", "machineKey": key.PublicKey().Bytes()}, &ans); err != nil {
		t.Fatal(err)
	}
	secret := seal.NewPairingSecret()
	phone, _ := seal.GenerateKeyPair()
	_, confirm, _ := seal.PairingKeys(secret)
	tag, _ := base64.RawURLEncoding.DecodeString(seal.ConfirmTag(confirm, seal.RoleDevice, key.PublicKey(), phone.Public()))
	if err := relayCall(t.Context(), "POST", base+"/api/pair/redeem", "", map[string]any{"code": ans.Code, "name": "phone", "publicKey": phone.Public().Bytes(), "confirm": tag}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := waitPairResult(t.Context(), base, token, ans.Code, nil, func(pairResult) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = confirmPaired(t.Context(), nil, kr, base, token, ans.Code, secret, res)
	t.Logf("failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), "did not confirm") || !strings.Contains(err.Error(), "credential for it was removed") {
		t.Fatalf("confirmPaired: %v", err)
	}
	if trusted, _ := kr.Trusted(); len(trusted) != 0 {
		t.Fatalf("trusted: %+v", trusted)
	}
	if names := credentialNames(t, base, token); slices.Contains(names, "phone") {
		t.Fatalf("the relay keeps the phone's credential: %v", names)
	}
}
