package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/seal"
	"github.com/makiuchi-d/gozxing"
	gzqr "github.com/makiuchi-d/gozxing/qrcode"
)

// decodeQRText reads back a QR code printed by printQR: each character is
// two modules (upper and lower half), drawn 4 pixels a module for a
// pure-Go decoder.
func decodeQRText(t *testing.T, text string) string {
	t.Helper()
	text = regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(text, "")
	var rows [][]bool
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		top, bottom := []bool{}, []bool{}
		for _, r := range line {
			top = append(top, r == '█' || r == '▀')
			bottom = append(bottom, r == '█' || r == '▄')
		}
		rows = append(rows, top, bottom)
	}
	const px = 4
	w, h := len(rows[0])*px, len(rows)*px
	img := image.NewGray(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			c := color.Gray{255}
			if x/px < len(rows[y/px]) && rows[y/px][x/px] {
				c = color.Gray{0}
			}
			img.SetGray(x, y, c)
		}
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	// The image is the code alone, as printed (PURE_BARCODE): without the
	// hint, the finder-pattern search of this decoder missed about 1 in
	// 100 random pairing links' codes, which decode with it.
	res, err := gzqr.NewQRCodeReader().Decode(bmp, map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_PURE_BARCODE: true})
	if err != nil {
		t.Fatalf("the printed QR code does not decode: %v\n%s", err, text)
	}
	return res.GetText()
}

// The printed QR code decodes to the link, for links of several lengths.
func TestPrintedQRDecodes(t *testing.T) {
	for _, link := range []string{
		pairLink("https://127.0.0.1:8707", "ABCDEFGHJK", base64.RawURLEncoding.EncodeToString(make([]byte, 32)), seal.NewPairingSecret()),
		pairLink("https://a-rather-long-machine-name.tail1234.ts.net", "0123456789", base64.RawURLEncoding.EncodeToString(make([]byte, 32)), seal.NewPairingSecret()),
	} {
		var b strings.Builder
		if err := printQR(&b, link); err != nil {
			t.Fatal(err)
		}
		if got := decodeQRText(t, b.String()); got != link {
			t.Errorf("decoded %q, want %q", got, link)
		}
	}
}

// pair prints a QR code of the pairing link; the link's code redeems for a
// device credential once. pair --machine and login give a second machine
// its own credential (kept 0600), with which devices lists, renames and
// revokes.
func TestPairLoginDevices(t *testing.T) {
	data, state, state2 := t.TempDir(), t.TempDir(), t.TempDir()
	cmd, base, _ := startServe(t, data)
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()

	res := run(t, "pair", "--no-wait", "--relay", base, "--data", data, "--state", state)
	if res.code != 0 {
		t.Fatalf("pair: %+v", res)
	}
	m := regexp.MustCompile(`open:\s+(\S+#pair=([0-9A-Z]+)\.([A-Za-z0-9_-]{43})\.([A-Za-z0-9_-]{22}))`).FindStringSubmatch(res.stdout)
	if m == nil {
		t.Fatalf("no link in %q", res.stdout)
	}
	link, code := m[1], m[2]
	if !strings.HasPrefix(link, base+"/#pair=") {
		t.Errorf("link %q", link)
	}
	qrPart := res.stdout[:strings.Index(res.stdout, "Scan this")]
	if strings.ContainsRune(res.stdout, '\x1b') {
		t.Errorf("escape sequences in pair's output to a pipe: %q", qrPart[:min(len(qrPart), 40)])
	}
	if got := decodeQRText(t, qrPart); got != link {
		t.Errorf("the QR code says %q, the link is %q", got, link)
	}
	if !strings.Contains(res.stderr, "HTTPS") {
		t.Errorf("no warning about plain http: %q", res.stderr)
	}
	if fi, err := os.Stat(filepath.Join(state, MachineKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("machine key: %v %v", fi, err)
	}
	redeem := func(code string) (int, string) {
		resp, err := http.Post(base+"/api/pair/redeem", "application/json", strings.NewReader(`{"code":"`+code+`","name":"iPhone"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return resp.StatusCode, b.String()
	}
	st, redeemed := redeem(code)
	if st != 200 || !strings.Contains(redeemed, `"role":"device"`) {
		t.Fatalf("redeem: %d %s", st, redeemed)
	}
	if st, b := redeem(code); st != http.StatusForbidden || !strings.Contains(b, "already used") {
		t.Errorf("a second time: %d %s", st, b)
	}

	// A second machine.
	res = run(t, "pair", "--machine", "--relay", base, "--data", data, "--state", state)
	mc := regexp.MustCompile(`ccrelay login (\S+) ([0-9A-Z]+)`).FindStringSubmatch(res.stdout)
	if res.code != 0 || mc == nil || mc[1] != base {
		t.Fatalf("pair --machine: %+v", res)
	}
	res = run(t, "login", mc[1], mc[2], "--state", state2, "--name", "desktop")
	if res.code != 0 || !strings.Contains(res.stdout, `"desktop"`) {
		t.Fatalf("login: %+v", res)
	}
	fi, err := os.Stat(filepath.Join(state2, LoginFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("login file: %v %v", fi, err)
	}
	b, _ := os.ReadFile(filepath.Join(state2, LoginFile))
	var l login
	if json.Unmarshal(b, &l); l.Relay != base || !strings.HasPrefix(l.Credential, "ccr_") {
		t.Fatalf("login file: %s", b)
	}
	// The second machine manages devices with its own credential (no
	// --data: the relay's token is not read).
	res = run(t, "devices", "--state", state2)
	if res.code != 0 || !regexp.MustCompile(`(?m)^desktop\s+machine\s+\d{4}-`).MatchString(res.stdout) || !regexp.MustCompile(`(?m)^iPhone\s+device\s+`).MatchString(res.stdout) {
		t.Fatalf("devices: %+v", res)
	}
	if res = run(t, "devices", "rename", "iPhone", "Ann's phone", "--state", state2); res.code != 0 {
		t.Fatalf("rename: %+v", res)
	}
	// The machine that revokes a device trusts it no more: its sessions
	// rotate their keys without it (docs/security.md, "Key rotation").
	var dev struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(redeemed), &dev); err != nil || dev.ID == "" {
		t.Fatalf("redeem answer %s: %v", redeemed, err)
	}
	pub := make([]byte, 32)
	pub[0] = 9
	trusted, _ := json.Marshal([]apiclient.TrustedDevice{{ID: dev.ID, Name: "iPhone", PublicKey: pub}, {ID: "other", Name: "tablet", PublicKey: pub}})
	if err := os.WriteFile(filepath.Join(state2, apiclient.TrustedDevicesFile), trusted, 0o600); err != nil {
		t.Fatal(err)
	}
	if res = run(t, "devices", "revoke", "Ann's phone", "--state", state2); res.code != 0 || !strings.Contains(res.stdout, `Revoked device "Ann's phone"`) ||
		!strings.Contains(res.stdout, "no longer trusts it") {
		t.Fatalf("revoke: %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(state2, apiclient.TrustedDevicesFile)); strings.Contains(string(b), dev.ID) || !strings.Contains(string(b), `"other"`) {
		t.Errorf("trusted devices after the revocation: %s", b)
	}
	if res = run(t, "devices", "revoke", "Ann's phone", "--state", state2); res.code == 0 || !strings.Contains(res.stderr, "no such machine or device") {
		t.Errorf("revoke again: %+v", res)
	}
	// A wrong code for login says so.
	if res = run(t, "login", base, "ZZZZZZZZZZ", "--state", t.TempDir()); res.code == 0 || !strings.Contains(res.stderr, "wrong pairing code") {
		t.Errorf("login with a wrong code: %+v", res)
	}
}

// Two ccrelay starting together in one state folder make one machine key:
// each gets the same (a key that changed would no longer match the key
// the devices paired with).
func TestMachineKeyMadeOnce(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	keys := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			k, err := machineKey(dir)
			errs[i] = err
			if err == nil {
				keys[i] = k.Bytes()
			}
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("machine key %d: %v", i, errs[i])
		}
		if !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("process %d got another key", i)
		}
	}
}
