package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
)

// serve --metrics-listen serves /metrics there, and not on the public
// listener.
func TestServeMetricsListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd, base, _ := startServe(t, t.TempDir(), "--metrics-listen", addr)
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	get := func(u string) (int, string) {
		t.Helper()
		r, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	if code, body := get("http://" + addr + "/metrics"); code != 200 || !strings.Contains(body, "ccrelay_connections_total") {
		t.Fatalf("metrics listener: %d\n%.300s", code, body)
	}
	if _, body := get(base + "/metrics"); strings.Contains(body, "ccrelay_connections_total") {
		t.Fatal("metrics served on the public listener")
	}
	if code, body := get(base + "/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("healthz: %d %q", code, body)
	}
}

func TestLogFormat(t *testing.T) {
	for _, tc := range []struct {
		format, want string
		ok           bool
	}{
		{"text", "msg=hello", true},
		{"json", `"msg":"hello"`, true},
		{"xml", "", false},
	} {
		var b strings.Builder
		log, err := newLogger(tc.format, &b)
		if (err == nil) != tc.ok {
			t.Fatalf("%s: %v", tc.format, err)
		}
		if err != nil {
			continue
		}
		log.Info("hello")
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("%s: %q", tc.format, b.String())
		}
	}
}
