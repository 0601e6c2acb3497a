package main

import (
	"bytes"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/seal"
	"github.com/creack/pty"
)

// To anything but a terminal (a file, a pipe into a CI log) the QR code
// is plain text: no escape sequence, and it still decodes to the link. On
// a terminal it keeps its colours (black on white whatever the terminal's).
// Before, the escapes went to a file or a log as well.
func TestPrintQRPlainWhenNotTerminal(t *testing.T) {
	link := pairLink("https://127.0.0.1:8707", "ABCDEFGHJK", base64.RawURLEncoding.EncodeToString(make([]byte, 32)), seal.NewPairingSecret())

	file, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var builder strings.Builder
	for _, tc := range []struct {
		name string
		w    io.Writer
		read func() string
	}{
		{"writer", &builder, builder.String},
		{"file", file, func() string {
			b, err := os.ReadFile(file.Name())
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}},
		{"pipe", w, func() string {
			w.Close()
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}},
	} {
		if err := printQR(tc.w, link); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		out := tc.read()
		if strings.ContainsRune(out, '\x1b') {
			t.Errorf("%s: escape sequences in the QR code: %q", tc.name, out[:min(len(out), 40)])
		}
		if got := decodeQRText(t, out); got != link {
			t.Errorf("%s: decoded %q, want %q", tc.name, got, link)
		}
	}

	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a terminal: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	got := make(chan []byte, 1)
	go func() {
		var b bytes.Buffer
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf) // an error once the terminal's side is closed
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		got <- b.Bytes()
	}()
	err = printQR(tty, link)
	tty.Close()
	if err != nil {
		t.Fatal(err)
	}
	if out := <-got; !bytes.Contains(out, []byte("\x1b[30;47m")) {
		t.Errorf("on a terminal: no colours: %q", out[:min(len(out), 40)])
	}
}
