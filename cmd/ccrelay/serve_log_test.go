package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// serve --log-file keeps the connection log bounded: with connections
// coming and going it turns the file over at --log-file-max, keeping one
// earlier file, so the log never takes more than twice that on disk.
func TestServeLogFileBounded(t *testing.T) {
	const max = 16 << 10
	data := t.TempDir()
	logPath := filepath.Join(t.TempDir(), "relay.log")
	cmd, base, token := startServe(t, data, "--log-file", logPath, "--log-file-max", "16KB")
	defer cmd.Process.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws := "ws" + strings.TrimPrefix(base, "http") + "/ws/app"
	size := func(p string) int64 {
		fi, err := os.Stat(p)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	// Enough connections for several turns over (a line is about 200 bytes).
	const n = 300
	for range n {
		c, _, err := websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
		if err != nil {
			t.Fatal(err)
		}
		c.Close(websocket.StatusNormalClosure, "")
	}
	// Stopped, the relay has written the close line of every connection.
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve did not stop cleanly: %v", err)
	}
	if size(logPath+".1") == 0 {
		t.Fatalf("the log did not turn over: %d bytes", size(logPath))
	}
	const line = 512 // a line that reaches the limit is finished in the file
	for _, p := range []string{logPath, logPath + ".1"} {
		if s := size(p); s > max+line {
			t.Errorf("%s: %d bytes, more than --log-file-max (%d) and a line", filepath.Base(p), s, max)
		}
	}
	if _, err := os.Stat(logPath + ".2"); err == nil {
		t.Errorf("more than one earlier file kept")
	}
	t.Logf("%d connections: %d + %d bytes of log", n, size(logPath), size(logPath+".1"))
}

func TestLogSizeFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"8MB", 8 << 20, true}, {"512KB", 512 << 10, true}, {"1gb", 1 << 30, true}, {"4096", 4096, true},
		{"0", 0, false}, {"-1MB", 0, false}, {"MB", 0, false}, {"8 TB", 0, false}, {"", 0, false},
	} {
		var z logSize
		err := z.Set(tc.in)
		if (err == nil) != tc.ok || (tc.ok && int64(z) != tc.want) {
			t.Errorf("Set(%q) = %d, %v; want %d, ok %v", tc.in, z, err, tc.want, tc.ok)
		}
	}
}
