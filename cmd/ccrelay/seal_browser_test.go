package main

// seal.js in headless Chromium: the RFC 9180 vectors, and interoperation
// with the Go package seal both ways. The test page and its module are
// served by this test only, under the app's own Content-Security-Policy;
// seal.js comes from the app's embedded files.

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ccrelay/ccrelay/seal"
	"github.com/ccrelay/ccrelay/web"
)

const sealTestPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>seal.js test</title>
<script type="module" src="/seal-test.js"></script></head><body></body></html>`

// sealTestModule exposes seal.js to the test as window.t, and keeps the
// session keys it unwraps in window.keys (CryptoKeys, never bytes).
const sealTestModule = `import * as s from './seal.js';
const h = (x) => Uint8Array.from(x.match(/../g) || [], (b) => parseInt(b, 16));
const hex = (b) => [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
const why = (e) => (e instanceof s.SealError ? e.code : e.name || String(e));
const code = async (p) => { try { await p; return 'ok'; } catch (e) { return why(e); } };
window.keys = {};
window.t = {
  s, h, hex, code,
  // vector runs one RFC 9180 vector as sender (ephemeral key from ikmE) and
  // as recipient, and returns what it computed.
  async vector(v) {
    const r = await s.deriveKeyPair(h(v.ikmR));
    const out = { pkRm: hex(r.publicKey), skRm: hex(r.secret), cts: [], pts: [], exports: [] };
    const { enc, ctx } = await s.hpke.setupS(h(v.pkRm), h(v.info), v.aead_id, h(v.ikmE));
    out.enc = hex(enc);
    out.shared_secret = hex(ctx.schedule.shared);
    out.key = hex(ctx.schedule.key);
    out.base_nonce = hex(ctx.schedule.baseNonce);
    for (const e of v.encryptions) out.cts.push(hex(await ctx.seal(h(e.aad), h(e.pt))));
    const rc = await s.hpke.setupR(enc, r.privateKey, r.publicKey, h(v.info), v.aead_id);
    for (const e of v.encryptions) out.pts.push(hex(await rc.open(h(e.aad), h(e.ct))));
    for (const e of v.exports) out.exports.push(hex(await rc.export(h(e.exporter_context), e.L)));
    const bad = await s.hpke.setupR(enc, r.privateKey, r.publicKey, h(v.info + '00'), v.aead_id);
    out.otherInfo = await code(bad.open(h(v.encryptions[0].aad), h(v.encryptions[0].ct)));
    return out;
  },
  async device() {
    const d = await s.loadOrCreateDeviceKey();
    window.device = d;
    const exportable = await code(crypto.subtle.exportKey('pkcs8', d.privateKey));
    return { pub: s.b64encode(d.publicKey), created: d.created, extractable: d.privateKey.extractable, exportable };
  },
  async unwrap(name, machine, session, wrapped) {
    try {
      window.keys[name] = await s.unwrapKey(window.device, s.parsePublicKey(machine), session, wrapped);
      return 'ok';
    } catch (e) { return why(e); }
  },
  async unwrapAll(name, machine, session, wrapped) {
    try {
      window.keys[name] = await s.unwrapKeys(window.device, s.parsePublicKey(machine), session, wrapped);
      return window.keys[name].length;
    } catch (e) { return why(e); }
  },
  sealEpoch: (name, ad, text, epoch) => s.seal(window.keys[name][epoch], ad, text, epoch),
  async open(name, ad, text) {
    try { return { text: await s.openText(window.keys[name], ad, text) }; } catch (e) { return { code: why(e) }; }
  },
  seal: (name, ad, text) => s.seal(window.keys[name], ad, text),
  // speed seals and opens n values of size bytes and says how long each took.
  async speed(n, size) {
    const key = await s.importSessionKey(crypto.getRandomValues(new Uint8Array(32)));
    const pt = new Uint8Array(size).fill(120);
    const sealed = [];
    let t0 = performance.now();
    for (let i = 0; i < n; i++) sealed.push(await s.seal(key, { session: 's', id: 'e' + i, direction: s.FROM_MACHINE }, pt));
    const sealMs = performance.now() - t0;
    t0 = performance.now();
    for (let i = 0; i < n; i++) await s.open(key, { session: 's', id: 'e' + i, direction: s.FROM_MACHINE }, sealed[i]);
    return { sealMs, openMs: performance.now() - t0 };
  },
};
document.body.dataset.ready = '1';
`

// sealTestServer serves the test page, its module and the app's seal.js.
func sealTestServer(t *testing.T) string {
	t.Helper()
	app := web.Handler()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /seal-test.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", web.ContentSecurityPolicy)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, sealTestPage)
	})
	mux.HandleFunc("GET /seal-test.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", web.ContentSecurityPolicy)
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		fmt.Fprint(w, sealTestModule)
	})
	mux.Handle("GET /seal.js", app)
	srv := httptest.NewServer(mux) // 127.0.0.1: a secure context, so WebCrypto is there
	t.Cleanup(srv.Close)
	return srv.URL
}

// evalAwait runs a JavaScript expression that returns a promise and
// decodes its value.
func evalAwait[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %.80s: %v", expr, err)
	}
	return v
}

// js is a Go value as a JavaScript literal.
func js(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type jsAD struct {
	Session   string `json:"session"`
	ID        string `json:"id"`
	Direction int    `json:"direction"`
}

func TestSealBrowser(t *testing.T) {
	ctx := newBrowser(t)
	base := sealTestServer(t)
	load := func() {
		must(t, ctx, chromedp.Navigate(base+"/seal-test.html"))
		waitJS(t, ctx, "the test module", `document.body.dataset.ready === '1'`)
	}
	load()

	t.Run("RFC 9180 vectors", func(t *testing.T) {
		raw, err := os.ReadFile("../../seal/testdata/rfc9180-base.json")
		if err != nil {
			t.Fatal(err)
		}
		var vectors []map[string]any
		if err := json.Unmarshal(raw, &vectors); err != nil {
			t.Fatal(err)
		}
		for _, v := range vectors {
			t.Run(v["name"].(string), func(t *testing.T) {
				got := evalAwait[map[string]any](t, ctx, "t.vector("+js(t, v)+")")
				for _, k := range []string{"pkRm", "enc", "shared_secret", "key", "base_nonce"} {
					if want, ok := v[k]; ok && got[k] != want {
						t.Errorf("%s = %v, want %v", k, got[k], want)
					}
				}
				// X25519 private keys compare after clamping.
				if sk, _ := hex.DecodeString(got["skRm"].(string)); len(sk) == 32 {
					want, _ := hex.DecodeString(v["skRm"].(string))
					clamp := func(b []byte) string {
						c := append([]byte(nil), b...)
						c[0] &= 248
						c[31] = c[31]&127 | 64
						return hex.EncodeToString(c)
					}
					if clamp(sk) != clamp(want) {
						t.Errorf("skRm = %x, want %x", sk, want)
					}
				}
				for i, e := range v["encryptions"].([]any) {
					e := e.(map[string]any)
					if ct := got["cts"].([]any)[i]; ct != e["ct"] {
						t.Errorf("ciphertext %d = %v, want %v", i, ct, e["ct"])
					}
					if pt := got["pts"].([]any)[i]; pt != e["pt"] {
						t.Errorf("plaintext %d = %v, want %v", i, pt, e["pt"])
					}
				}
				for i, e := range v["exports"].([]any) {
					e := e.(map[string]any)
					if x := got["exports"].([]any)[i]; x != e["exported_value"] {
						t.Errorf("export %d = %v, want %v", i, x, e["exported_value"])
					}
				}
				if got["otherInfo"] != "open" {
					t.Errorf("another info: %v, want the open to fail", got["otherInfo"])
				}
			})
		}
	})

	type deviceInfo struct {
		Pub         string `json:"pub"`
		Created     bool   `json:"created"`
		Extractable bool   `json:"extractable"`
		Exportable  string `json:"exportable"`
	}
	dev := evalAwait[deviceInfo](t, ctx, `t.device()`)
	if !dev.Created || dev.Extractable || dev.Exportable == "ok" {
		t.Fatalf("device key: %+v, want a new non-extractable key", dev)
	}
	devicePub, err := seal.ParsePublicKey(dev.Pub)
	if err != nil {
		t.Fatal(err)
	}

	machine, err := seal.GenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	const session = "4f0c8a52-1d2b-4c3e-8f9a-0b1c2d3e4f50"
	key, err := seal.NewSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	wrapped, err := seal.WrapKey(machine, devicePub, session, key)
	if err != nil {
		t.Fatal(err)
	}
	unwrap := func(name string, machine *seal.KeyPair, session, wrapped string) string {
		return evalAwait[string](t, ctx, fmt.Sprintf("t.unwrap(%s, %s, %s, %s)", js(t, name), js(t, machine.PublicString()), js(t, session), js(t, wrapped)))
	}

	t.Run("Go wraps, the browser unwraps", func(t *testing.T) {
		if got := unwrap("k", machine, session, wrapped); got != "ok" {
			t.Fatalf("unwrap: %s", got)
		}
		relay, _ := seal.GenerateKeyPair()
		forged, _ := seal.WrapKey(relay, devicePub, session, key)
		raw, _ := base64.RawURLEncoding.DecodeString(wrapped)
		raw[40] ^= 1
		flipped := base64.RawURLEncoding.EncodeToString(raw)
		for name, c := range map[string]struct {
			machine          *seal.KeyPair
			session, wrapped string
			want             string
		}{
			"the relay's own wrap": {machine, session, forged, "unwrap"},
			"another session":      {machine, "5f0c8a52-1d2b-4c3e-8f9a-0b1c2d3e4f50", wrapped, "unwrap"},
			"another machine":      {relay, session, wrapped, "unwrap"},
			"a flipped byte":       {machine, session, flipped, "unwrap"},
			"truncated":            {machine, session, wrapped[:len(wrapped)-2], "malformed"},
		} {
			if got := unwrap("bad", c.machine, c.session, c.wrapped); got != c.want {
				t.Errorf("%s: %s, want %s", name, got, c.want)
			}
		}
	})

	type opened struct {
		Text string `json:"text"`
		Code string `json:"code"`
	}
	openIn := func(ad jsAD, sealed string) opened {
		return evalAwait[opened](t, ctx, fmt.Sprintf("t.open('k', %s, %s)", js(t, ad), js(t, sealed)))
	}
	envAD := seal.AD{Session: session, ID: "tz4a98xxat96iws9zmbrgj3a", Direction: seal.FromMachine}
	body := `{"kind":"text","text":"héllo — a prompt with ünïcode"}`

	t.Run("Go seals, the browser opens", func(t *testing.T) {
		sealed, err := key.Seal(envAD, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		ad := jsAD{envAD.Session, envAD.ID, int(envAD.Direction)}
		if got := openIn(ad, sealed); got.Text != body || got.Code != "" {
			t.Fatalf("open: %+v", got)
		}
		flipped, _ := seal.DecodeSealed(sealed)
		flipped[len(flipped)-1] ^= 1
		for name, c := range map[string]struct {
			ad     jsAD
			sealed string
			want   string
		}{
			"another session":   {jsAD{"5f0c8a52-1d2b-4c3e-8f9a-0b1c2d3e4f50", ad.ID, ad.Direction}, sealed, "open"},
			"another position":  {jsAD{ad.Session, "uz4a98xxat96iws9zmbrgj3a", ad.Direction}, sealed, "open"},
			"another direction": {jsAD{ad.Session, ad.ID, int(seal.FromDevice)}, sealed, "open"},
			"a flipped byte":    {ad, base64.RawURLEncoding.EncodeToString(flipped), "open"},
			"version 3":         {ad, "Aw" + sealed[2:], "version"},
			"truncated":         {ad, sealed[:20], "malformed"},
			"padded":            {ad, sealed + "=", "malformed"},
		} {
			if got := openIn(c.ad, c.sealed); got.Code != c.want {
				t.Errorf("%s: %+v, want %s", name, got, c.want)
			}
		}
	})

	t.Run("the browser seals, Go opens", func(t *testing.T) {
		cmdAD := seal.AD{Session: session, ID: "c5k9x2m4p7q1r8s3t6v0w2y4", Direction: seal.FromDevice}
		prompt := "run the tests — twice"
		sealed := evalAwait[string](t, ctx, fmt.Sprintf("t.seal('k', %s, %s)", js(t, jsAD{cmdAD.Session, cmdAD.ID, int(cmdAD.Direction)}), js(t, prompt)))
		got, err := key.Open(cmdAD, sealed)
		if err != nil || string(got) != prompt {
			t.Fatalf("Go opens %q, %v", got, err)
		}
		for name, ad := range map[string]seal.AD{
			"another session":   {Session: "5f0c8a52-1d2b-4c3e-8f9a-0b1c2d3e4f50", ID: cmdAD.ID, Direction: cmdAD.Direction},
			"another command":   {Session: session, ID: "d5k9x2m4p7q1r8s3t6v0w2y4", Direction: cmdAD.Direction},
			"another direction": {Session: session, ID: cmdAD.ID, Direction: seal.FromMachine},
		} {
			if _, err := key.Open(ad, sealed); !errors.Is(err, seal.ErrOpen) {
				t.Errorf("%s: %v, want ErrOpen", name, err)
			}
		}
	})

	t.Run("key epochs", func(t *testing.T) {
		// A session whose key was replaced twice (two revocations): the
		// set opens to its three keys; a value of each epoch opens under
		// the set; a device given only the first key opens nothing later;
		// the browser seals under the current epoch as Go reads it.
		k1, _ := seal.NewSessionKey()
		k2, _ := seal.NewSessionKey()
		set, err := seal.WrapKeys(machine, devicePub, session, []*seal.SessionKey{key, k1, k2})
		if err != nil {
			t.Fatal(err)
		}
		unwrapAll := func(name, wrapped string) any {
			return evalAwait[any](t, ctx, fmt.Sprintf("t.unwrapAll(%s, %s, %s, %s)", js(t, name), js(t, machine.PublicString()), js(t, session), js(t, wrapped)))
		}
		if got := unwrapAll("set", set); got != float64(3) {
			t.Fatalf("unwrapAll: %v", got)
		}
		if got := unwrapAll("old", wrapped); got != float64(1) {
			t.Fatalf("unwrapAll of one key: %v", got)
		}
		raw, _ := base64.RawURLEncoding.DecodeString(set)
		raw[len(raw)-40] ^= 1
		if got := unwrapAll("bad", base64.RawURLEncoding.EncodeToString(raw)); got != "unwrap" {
			t.Errorf("a flipped byte: %v", got)
		}
		if got := unwrapAll("bad", set[:len(set)-43]); got != "malformed" && got != "unwrap" {
			t.Errorf("a set cut by a key: %v", got)
		}
		ad := jsAD{envAD.Session, envAD.ID, int(envAD.Direction)}
		for epoch, k := range []*seal.SessionKey{key, k1, k2} {
			sealed, err := k.SealEpoch(epoch, envAD, []byte(body))
			if err != nil {
				t.Fatal(err)
			}
			got := evalAwait[opened](t, ctx, fmt.Sprintf("t.open('set', %s, %s)", js(t, ad), js(t, sealed)))
			if got.Text != body {
				t.Errorf("epoch %d does not open under the set: %+v", epoch, got)
			}
			got = evalAwait[opened](t, ctx, fmt.Sprintf("t.open('old', %s, %s)", js(t, ad), js(t, sealed)))
			if (epoch == 0) != (got.Text == body) || (epoch > 0 && got.Code != "open") {
				t.Errorf("epoch %d under the first key alone: %+v", epoch, got)
			}
		}
		cmdAD := seal.AD{Session: session, ID: "e5k9x2m4p7q1r8s3t6v0w2y4", Direction: seal.FromDevice}
		sealed := evalAwait[string](t, ctx, fmt.Sprintf("t.sealEpoch('set', %s, 'after', 2)", js(t, jsAD{cmdAD.Session, cmdAD.ID, int(cmdAD.Direction)})))
		rawCmd, err := seal.DecodeSealed(sealed)
		if err != nil {
			t.Fatal(err)
		}
		if e, _ := seal.Epoch(rawCmd); e != 2 {
			t.Errorf("the browser sealed under epoch %d, want 2", e)
		}
		if got, err := k2.OpenBytes(cmdAD, rawCmd); err != nil || string(got) != "after" {
			t.Errorf("Go opens %q, %v", got, err)
		}
	})

	t.Run("pairing", func(t *testing.T) {
		secret := seal.NewPairingSecret()
		redeem, confirm, err := seal.PairingKeys(secret)
		if err != nil {
			t.Fatal(err)
		}
		type pairing struct {
			Redeem, DeviceTag, Fingerprint, MachineOK, Swapped, Reflected string
		}
		mTag := seal.ConfirmTag(confirm, seal.RoleMachine, machine.Public(), devicePub)
		relay, _ := seal.GenerateKeyPair()
		got := evalAwait[pairing](t, ctx, fmt.Sprintf(`(async () => {
			const { s, code } = t;
			const m = s.parsePublicKey(%s), d = window.device.publicKey, r = s.parsePublicKey(%s);
			const { redeem, confirm } = await s.pairingKeys(%s);
			return {
				Redeem: redeem,
				DeviceTag: await s.confirmTag(confirm, s.ROLE_DEVICE, m, d),
				Fingerprint: await s.fingerprint(m),
				MachineOK: await code(s.checkConfirm(confirm, s.ROLE_MACHINE, m, d, %s)),
				Swapped: await code(s.checkConfirm(confirm, s.ROLE_MACHINE, r, d, %s)),
				Reflected: await code(s.checkConfirm(confirm, s.ROLE_DEVICE, m, d, %s)),
			};
		})()`, js(t, machine.PublicString()), js(t, relay.PublicString()), js(t, secret), js(t, mTag), js(t, mTag), js(t, mTag)))
		if got.Redeem != redeem {
			t.Errorf("redeem token %q, Go %q", got.Redeem, redeem)
		}
		if got.Fingerprint != machine.Fingerprint() {
			t.Errorf("fingerprint %q, Go %q", got.Fingerprint, machine.Fingerprint())
		}
		if err := seal.CheckConfirm(confirm, seal.RoleDevice, machine.Public(), devicePub, got.DeviceTag); err != nil {
			t.Errorf("Go refuses the browser's confirmation: %v", err)
		}
		if err := seal.CheckConfirm(confirm, seal.RoleDevice, machine.Public(), relay.Public(), got.DeviceTag); !errors.Is(err, seal.ErrConfirm) {
			t.Errorf("Go accepts the browser's confirmation for a swapped device key: %v", err)
		}
		if got.MachineOK != "ok" || got.Swapped != "confirm" || got.Reflected != "confirm" {
			t.Errorf("browser checks: machine's tag %s, swapped key %s, reflected tag %s; want ok, confirm, confirm", got.MachineOK, got.Swapped, got.Reflected)
		}
	})

	t.Run("the device key survives a reload", func(t *testing.T) {
		load()
		again := evalAwait[deviceInfo](t, ctx, `t.device()`)
		if again.Pub != dev.Pub || again.Created || again.Extractable {
			t.Fatalf("after reload: %+v, want the same non-extractable key as %s", again, dev.Pub)
		}
		if got := unwrap("k", machine, session, wrapped); got != "ok" {
			t.Fatalf("unwrap after reload: %s", got)
		}
		sealed, _ := key.Seal(envAD, []byte(body))
		if got := openIn(jsAD{envAD.Session, envAD.ID, int(envAD.Direction)}, sealed); got.Text != body {
			t.Fatalf("open after reload: %+v", got)
		}
	})

	t.Run("strict base64url", func(t *testing.T) {
		// Each value has one text form, as in Go: no padding, no other
		// alphabet, unused trailing bits zero.
		for _, text := range []string{"AB", "AAB", "AA=", "A+", "A/", "A", "AAAAA"} {
			if got := evalAwait[string](t, ctx, "t.code((async () => t.s.b64decode("+js(t, text)+"))())"); got != "malformed" {
				t.Errorf("b64decode(%q): %s, want malformed", text, got)
			}
		}
		if got := evalAwait[string](t, ctx, `t.s.b64encode(t.s.b64decode("_-8"))`); got != "_-8" {
			t.Errorf("round trip of _-8: %q", got)
		}
	})

	t.Run("speed", func(t *testing.T) {
		for _, size := range []int{256, 4 << 10, 64 << 10} {
			n := 2000
			if size > 4<<10 {
				n = 200
			}
			got := evalAwait[struct {
				SealMs float64 `json:"sealMs"`
				OpenMs float64 `json:"openMs"`
			}](t, ctx, fmt.Sprintf("t.speed(%d, %d)", n, size))
			mb := float64(n*size) / (1 << 20)
			t.Logf("seal.js, %d values of %d bytes: seal %.1f µs each (%.0f MB/s), open %.1f µs each (%.0f MB/s)",
				n, size, got.SealMs*1000/float64(n), mb/(got.SealMs/1000), got.OpenMs*1000/float64(n), mb/(got.OpenMs/1000))
		}
	})
}
