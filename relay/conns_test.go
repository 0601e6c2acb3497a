package relay

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// hijackable is a ResponseWriter whose Hijack gives a connection and
// buffers as net/http does: a reader that holds bytes already read.
type hijackable struct {
	http.ResponseWriter
	conn net.Conn
	brw  *bufio.ReadWriter
}

func (h hijackable) Hijack() (net.Conn, *bufio.ReadWriter, error) { return h.conn, h.brw, nil }

// An app connection's buffers are appBufferBytes, not net/http's 4 KiB,
// in the very bufio values net/http holds; bytes the reader held already
// are read first, then the connection's.
func TestSmallBuffers(t *testing.T) {
	relaySide, client := net.Pipe()
	defer relaySide.Close()
	defer client.Close()
	held := bufio.NewReader(io.MultiReader(strings.NewReader("held"), relaySide))
	if _, err := held.Peek(4); err != nil {
		t.Fatal(err)
	}
	brw := bufio.NewReadWriter(held, bufio.NewWriter(relaySide))
	conn, got, err := smallBuffers{hijackable{httptest.NewRecorder(), relaySide, brw}}.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	if conn != relaySide || got.Reader != held || got.Writer != brw.Writer {
		t.Fatal("not the connection and buffers net/http holds")
	}
	if got.Reader.Size() != appBufferBytes || got.Writer.Size() != appBufferBytes {
		t.Fatalf("buffers of %d and %d bytes, want %d", got.Reader.Size(), got.Writer.Size(), appBufferBytes)
	}
	if got.Reader.Buffered() != 4 {
		t.Fatalf("%d bytes held, want 4", got.Reader.Buffered())
	}
	go func() {
		client.Write([]byte("sent"))
		buf := make([]byte, 5)
		io.ReadFull(client, buf)
		client.Write(buf)
	}()
	b := make([]byte, 8)
	if _, err := io.ReadFull(got.Reader, b); err != nil || string(b) != "heldsent" {
		t.Fatalf("read %q, %v; want heldsent", b, err)
	}
	got.Writer.WriteString("reply")
	if err := got.Writer.Flush(); err != nil {
		t.Fatal(err)
	}
	b = make([]byte, 5)
	if _, err := io.ReadFull(got.Reader, b); err != nil || string(b) != "reply" {
		t.Fatalf("echo %q, %v", b, err)
	}
}
