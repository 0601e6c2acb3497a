package push_test

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/push"
	"github.com/ccrelay/ccrelay/push/pushtest"
)

func b64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// RFC 8291 section 5 (and Appendix A): the example message.
const (
	rfcPlaintext = "When I grow up, I want to be a watermelon"
	rfcUAPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
	rfcUAPublic  = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
	rfcASPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
	rfcAuth      = "BTBZMqHH6r4Tts7J_aSIgg"
	rfcSalt      = "DGv6ra1nlYgDCS1FRnbzlw"
	rfcMessage   = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
)

func TestDecryptRFC8291Example(t *testing.T) {
	ua, err := ecdh.P256().NewPrivateKey(b64(t, rfcUAPrivate))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ua.PublicKey().Bytes(), b64(t, rfcUAPublic)) {
		t.Fatal("ua_private does not give ua_public")
	}
	got, err := push.Decrypt(b64(t, rfcMessage), ua, b64(t, rfcAuth))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != rfcPlaintext {
		t.Errorf("decrypted %q, want %q", got, rfcPlaintext)
	}
	// A changed byte anywhere fails.
	for _, i := range []int{0, 25, 90, 100} { // salt, sender key, ciphertext, tag
		m := b64(t, rfcMessage)
		m[i] ^= 1
		if _, err := push.Decrypt(m, ua, b64(t, rfcAuth)); err == nil {
			t.Errorf("message with byte %d changed decrypted", i)
		}
	}
	if _, err := push.Decrypt(b64(t, rfcMessage), ua, make([]byte, 16)); err == nil {
		t.Error("wrong auth secret decrypted")
	}
}

func TestEncryptRoundTrip(t *testing.T) {
	ua, _ := ecdh.P256().GenerateKey(nil)
	auth := bytes.Repeat([]byte{7}, 16)
	for _, n := range []int{0, 1, 100, push.MaxPayloadBytes} {
		pt := bytes.Repeat([]byte{'x'}, n)
		msg, err := push.Encrypt(pt, ua.PublicKey().Bytes(), auth)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if len(msg) > 4096 {
			t.Errorf("%d bytes: message of %d bytes, over 4096", n, len(msg))
		}
		got, err := push.Decrypt(msg, ua, auth)
		if err != nil || !bytes.Equal(got, pt) {
			t.Errorf("%d bytes: round trip %v", n, err)
		}
	}
	if _, err := push.Encrypt(make([]byte, push.MaxPayloadBytes+1), ua.PublicKey().Bytes(), auth); !errors.Is(err, push.ErrPayloadTooBig) {
		t.Errorf("payload over MaxPayloadBytes: %v", err)
	}
	if _, err := push.Encrypt([]byte("x"), []byte("not a key"), auth); err == nil {
		t.Error("a bad p256dh was taken")
	}
}

// A key pair written by MarshalKeys reads back the same; an older relay's
// key file is read; garbage is refused.
func TestVAPIDKeysMarshalled(t *testing.T) {
	k, err := push.NewKeys()
	if err != nil {
		t.Fatal(err)
	}
	b, err := push.MarshalKeys(k)
	if err != nil {
		t.Fatal(err)
	}
	again, err := push.ParseKeys(b)
	if err != nil {
		t.Fatal(err)
	}
	if again.PublicKey() != k.PublicKey() {
		t.Error("the key read back is another key")
	}
	if pub := b64(t, k.PublicKey()); len(pub) != 65 || pub[0] != 4 {
		t.Errorf("public key is %d bytes, want an uncompressed point", len(pub))
	}
	dir := t.TempDir()
	if _, err := push.ReadKeyFile(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no key file: %v, want os.ErrNotExist", err)
	}
	os.WriteFile(filepath.Join(dir, push.KeyFile), b, 0o600)
	if f, err := push.ReadKeyFile(dir); err != nil || f.PublicKey() != k.PublicKey() {
		t.Errorf("key file: %v", err)
	}
	os.WriteFile(filepath.Join(dir, push.KeyFile), []byte("garbage"), 0o600)
	if _, err := push.ReadKeyFile(dir); err == nil {
		t.Error("a garbage key file was taken")
	}
	_, ed, _ := ed25519.GenerateKey(nil)
	other, _ := x509.MarshalPKCS8PrivateKey(ed)
	if _, err := push.ParseKeys(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: other})); err == nil {
		t.Error("a key that is not P-256 was taken")
	}
}

func TestVAPIDToken(t *testing.T) {
	k, _ := push.NewKeys()
	other, _ := push.NewKeys()
	now := time.Unix(1_800_000_000, 0)
	h, err := k.Authorization("https://push.example.net/wpush/abc?x=1", "mailto:ops@example.net", now)
	if err != nil {
		t.Fatal(err)
	}
	key, c, err := push.VerifyAuthorization(h, "https://push.example.net", now)
	if err != nil {
		t.Fatal(err)
	}
	if key != k.PublicKey() || c.Sub != "mailto:ops@example.net" || c.Exp != now.Add(push.TokenLifetime).Unix() {
		t.Errorf("claims %+v key %s", c, key)
	}
	swapped := strings.Replace(h, "k="+k.PublicKey(), "k="+other.PublicKey(), 1)
	tok := h[strings.Index(h, "t=")+2 : strings.Index(h, ",")]
	parts := strings.Split(tok, ".")
	tampered := strings.Replace(h, parts[1], base64.RawURLEncoding.EncodeToString([]byte(`{"aud":"https://push.example.net","exp":1900000000,"sub":"mailto:x@y"}`)), 1)
	for name, tc := range map[string]struct {
		h, aud string
		at     time.Time
	}{
		"other key":     {swapped, "https://push.example.net", now},
		"other claims":  {tampered, "https://push.example.net", now},
		"other service": {h, "https://fcm.googleapis.com", now},
		"expired":       {h, "https://push.example.net", now.Add(push.TokenLifetime + time.Second)},
		"not vapid":     {"Bearer " + tok, "https://push.example.net", now},
	} {
		if _, _, err := push.VerifyAuthorization(tc.h, tc.aud, tc.at); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

// sender runs a WebPush with short retries against a fake service.
func sender(t *testing.T) (*push.WebPush, *pushtest.Service) {
	k, _ := push.NewKeys()
	svc := pushtest.New(t, k.PublicKey())
	w := push.NewWebPush(k, "mailto:ops@example.net", &http.Client{}, nil) // the fake service is on loopback
	push.SetBackoff(w, func(int, time.Duration) time.Duration { return time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w, svc
}

func TestWebPushDelivers(t *testing.T) {
	w, svc := sender(t)
	sub := svc.Subscribe("phone")
	payload := []byte(`{"session":"fc141a3b-0000-4000-8000-000000000000","kind":"turn","seq":12}`)
	if err := w.Send(sub, payload, push.UrgencyHigh, time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	m, ok := svc.Next(10 * time.Second)
	if !ok {
		t.Fatalf("nothing delivered; service errors: %v", svc.Errors())
	}
	if string(m.Payload) != string(payload) || m.TTL != 3600 || m.Urgency != "high" {
		t.Errorf("got %+v", m)
	}
	if e := svc.Errors(); len(e) > 0 {
		t.Errorf("service refused: %v", e)
	}
}

func TestWebPushStatuses(t *testing.T) {
	for _, tc := range []struct {
		name      string
		answers   []int
		delivered bool
		gone      bool
	}{
		{"404 removes", []int{404}, false, true},
		{"410 removes", []int{410}, false, true},
		{"500 is retried", []int{500, 503}, true, false},
		{"429 is retried", []int{429}, true, false},
		{"400 is dropped", []int{400}, false, false},
		{"retries end", []int{500, 500, 500, 500}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, svc := sender(t)
			sub := svc.Subscribe("phone")
			svc.Answer("phone", tc.answers...)
			goneC := make(chan struct{}, 1)
			if err := w.Send(sub, []byte(`{}`), "", time.Minute, func() { goneC <- struct{}{} }); err != nil {
				t.Fatal(err)
			}
			// A second message, sent after the first is settled: its
			// arrival says the first is done with.
			marker := svc.Subscribe("marker")
			w.Send(marker, []byte(`{"marker":true}`), "", time.Minute, nil)
			var got []pushtest.Message
			for {
				m, ok := svc.Next(10 * time.Second)
				if !ok {
					t.Fatalf("marker not delivered; errors %v", svc.Errors())
				}
				if m.Sub == "marker" && !tc.delivered {
					break
				}
				got = append(got, m)
				if m.Sub == "phone" {
					break
				}
			}
			if tc.delivered && (len(got) == 0 || got[len(got)-1].Sub != "phone") {
				t.Errorf("not delivered after %v", tc.answers)
			}
			if !tc.delivered {
				for _, m := range got {
					if m.Sub == "phone" {
						t.Errorf("delivered after %v", tc.answers)
					}
				}
			}
			select {
			case <-goneC:
				if !tc.gone {
					t.Error("onGone ran")
				}
			default:
				if tc.gone {
					t.Error("onGone did not run")
				}
			}
		})
	}
}

func TestWebPushQueueBounded(t *testing.T) {
	k, _ := push.NewKeys()
	svc := pushtest.New(t, k.PublicKey())
	w := push.NewWebPush(k, "mailto:ops@example.net", nil, nil) // not running: nothing leaves the queue
	sub := svc.Subscribe("phone")
	for i := range push.MaxQueue {
		if err := w.Send(sub, []byte(`{}`), "", time.Minute, nil); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if err := w.Send(sub, []byte(`{}`), "", time.Minute, nil); !errors.Is(err, push.ErrQueueFull) {
		t.Errorf("message %d: %v, want ErrQueueFull", push.MaxQueue+1, err)
	}
	if err := w.Send(sub, make([]byte, push.MaxPayloadBytes+1), "", time.Minute, nil); !errors.Is(err, push.ErrPayloadTooBig) {
		t.Errorf("payload over the limit: %v", err)
	}
	bad := sub
	bad.Keys.Auth = "short"
	if err := w.Send(bad, []byte(`{}`), "", time.Minute, nil); err == nil {
		t.Error("a subscription without a valid auth secret was taken")
	}
}

func TestNtfy(t *testing.T) {
	type post struct{ body, title, click string }
	var mu sync.Mutex
	got := make(chan post, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/ccrelay-topic" {
			http.NotFound(w, r)
			return
		}
		got <- post{string(b), r.Header.Get("Title"), r.Header.Get("Click")}
	}))
	defer srv.Close()
	n, err := push.NewNtfy(srv.URL+"/ccrelay-topic", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if err := n.Send("ccrelay", "Claude is waiting for your permission", "http://127.0.0.1:8707/#/s/x"); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		if p.body != "Claude is waiting for your permission" || p.title != "ccrelay" || p.click != "http://127.0.0.1:8707/#/s/x" {
			t.Errorf("posted %+v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing posted")
	}
	for _, bad := range []string{"", "ftp://x/y", "http://host", "not a url"} {
		if _, err := push.NewNtfy(bad, nil, nil); err == nil {
			t.Errorf("topic %q taken", bad)
		}
	}
}

func TestEncryptRFC8291Example(t *testing.T) {
	as, err := ecdh.P256().NewPrivateKey(b64(t, rfcASPrivate))
	if err != nil {
		t.Fatal(err)
	}
	got, err := push.EncryptWith([]byte(rfcPlaintext), b64(t, rfcUAPublic), b64(t, rfcAuth), as, b64(t, rfcSalt))
	if err != nil {
		t.Fatal(err)
	}
	if want := b64(t, rfcMessage); !bytes.Equal(got, want) {
		t.Errorf("encrypt:\n got %x\nwant %x", got, want)
	}
}
