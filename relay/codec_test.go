package relay

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
)

// Every body comes back exactly as it came, whatever it is.
func TestBodyRoundTrip(t *testing.T) {
	id, plain := perfBody(s1, 1)
	ct := make([]byte, 300)
	rand.Read(ct)
	sealed, _ := json.Marshal(protocol.SealedEnvelope{ID: id, Time: 1795373975149, Role: protocol.RoleAgent, Turn: "ca5cb6281a9d7b15959b999f",
		Ev: protocol.SealedEvent{T: protocol.KindText}, Sealed: base64.RawURLEncoding.EncodeToString(ct)})
	for _, tc := range []struct {
		name     string
		id       string
		body     []byte
		maxRatio float64 // stored bytes / body bytes at most (0: not checked)
	}{
		{"plain text envelope", id, plain, 0.6},
		{"sealed envelope", id, sealed, 0.75},
		{"id not first", id, []byte(`{"time":1,"id":"` + id + `"}`), 1},
		{"another id", "other", plain, 1},
		{"not base64 after sealed", id, []byte(`{"id":"` + id + `","ev":{"t":"text"},"sealed":"a=b"}`), 1},
		{"non-canonical base64", id, []byte(`{"id":"` + id + `","ev":{"t":"text"},"sealed":"QR"}`), 0},
		{"a control byte", id, []byte("{\"id\":\"" + id + "\",\"x\":\"\x01\"}"), 1},
		{"starts with 0x00", id, []byte{0, 1, 2}, 0},
		{"starts with 0x01", id, []byte{1}, 0},
		{"empty", id, nil, 0},
		{"the fragments themselves", id, []byte(`{"id":"` + id + `"` + string(bytes.Join(fragmentBytes(), nil)) + `"}`), 0.2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored := encodeBody(tc.id, tc.body)
			got, err := decodeBody(tc.id, stored)
			if err != nil || !bytes.Equal(got, tc.body) {
				t.Fatalf("round trip:\n got %q %v\nwant %q", got, err, tc.body)
			}
			if r := float64(len(stored)) / float64(len(tc.body)); tc.maxRatio > 0 && r > tc.maxRatio {
				t.Errorf("stored %d bytes of %d (%.2f), want at most %.2f", len(stored), len(tc.body), r, tc.maxRatio)
			}
		})
	}
}

func fragmentBytes() (out [][]byte) {
	for _, f := range fragments {
		out = append(out, []byte(f))
	}
	return out
}

// Real envelopes (the mapper's output for the test transcripts) shrink.
func TestBodyCorpus(t *testing.T) {
	var in, out int
	for _, it := range goldenItems(t) {
		stored := encodeBody(it.ID, it.Body)
		if got, err := decodeBody(it.ID, stored); err != nil || !bytes.Equal(got, it.Body) {
			t.Fatalf("round trip of %s: %v", it.ID, err)
		}
		in += len(it.Body)
		out += len(stored)
	}
	t.Logf("%d bytes stored as %d (%.2f)", in, out, float64(out)/float64(in))
	if float64(out) > 0.9*float64(in) {
		t.Errorf("stored %d bytes of %d", out, in)
	}
}

// goldenItems are the envelopes of the mapper's golden files (its output
// for the test transcripts), each id once.
func goldenItems(tb testing.TB) []Item {
	var paths []string
	filepath.WalkDir("../testdata/golden", func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".golden.jsonl") {
			paths = append(paths, p)
		}
		return err
	})
	seen := map[string]bool{}
	var items []Item
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, protocol.MaxEnvelopeBytes)
		for sc.Scan() {
			var e struct{ ID string }
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.ID == "" || seen[e.ID] {
				continue
			}
			seen[e.ID] = true
			items = append(items, Item{ID: e.ID, Body: bytes.Clone(sc.Bytes())})
		}
		f.Close()
	}
	if len(items) == 0 {
		tb.Fatal("no envelopes in the mapper's golden files")
	}
	return items
}

// A damaged stored body is an error, never a panic.
func FuzzDecodeBody(f *testing.F) {
	id, plain := perfBody(s1, 1)
	f.Add(encodeBody(id, plain))
	f.Add([]byte{0, tokSealed, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0x1e, 0x1f, 3, 'a'})
	f.Fuzz(func(t *testing.T, stored []byte) {
		decodeBody(id, stored)
	})
}

// Whatever comes in comes back.
func FuzzEncodeBody(f *testing.F) {
	id, plain := perfBody(s1, 1)
	f.Add(id, plain)
	f.Add(id, []byte(`{"id":"`+id+`","ev":{"t":"text"},"sealed":"QUJD"}`))
	f.Fuzz(func(t *testing.T, id string, body []byte) {
		got, err := decodeBody(id, encodeBody(id, body))
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("round trip of %q: %q %v", body, got, err)
		}
	})
}
