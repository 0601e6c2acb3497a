package apiclient

import (
	"bufio"
	"context"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// serveProc is a real `ccrelay serve` process.
type serveProc struct {
	t         *testing.T
	bin, data string
	addr      string
	cmd       *exec.Cmd
	token     string
}

func buildCcrelay(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ccrelay")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/ccrelay").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func (s *serveProc) start() {
	s.t.Helper()
	for attempt := 0; ; attempt++ {
		cmd := exec.Command(s.bin, "serve", "--data", s.data, "--listen", s.addr)
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			s.t.Fatal(err)
		}
		re := regexp.MustCompile(`#token=([0-9a-f]+)`)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				s.token = m[1]
				break
			}
		}
		go io.Copy(io.Discard, out)
		if s.token != "" {
			s.cmd = cmd
			return
		}
		cmd.Wait() // the port was not free yet
		if attempt == 50 {
			s.t.Fatal("relay did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *serveProc) kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.cmd.Wait()
	s.token = ""
}

// (a) The relay process is killed with SIGKILL mid-stream, several times,
// and started again: every envelope is stored once, in order.
func TestRelayKilledMidStream(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	s := &serveProc{t: t, bin: buildCcrelay(t), data: t.TempDir(), addr: addr}
	s.start()
	defer func() {
		if s.token != "" {
			s.kill()
		}
	}()
	box, err := OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	rc := runClient(Config{URL: "http://" + addr, Token: s.token, BatchSize: 50, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, box)
	ctx := context.Background()
	const n = 3000
	all := envs(sessK, 0, n)
	kills := 0
	for i := 0; i < n; i += 100 {
		if err := box.Append(ctx, sessK, all[i:i+100]); err != nil {
			t.Fatal(err)
		}
		if i%700 == 600 {
			// Kill while the client still has envelopes in flight.
			s.kill()
			kills++
			s.start()
		}
	}
	rc.finish(t)
	s.kill()
	r := &relayProc{t: t, db: filepath.Join(s.data, "relay.db")}
	checkStored(t, sessK, r.ids(sessK), all)
	t.Logf("%d envelopes through %d relay kills", n, kills)
}
