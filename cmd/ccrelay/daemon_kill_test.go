package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
)

// sessionProcesses lists the pids of the sessions' ccrelay processes that
// the daemon started for session (Linux: read from /proc).
func sessionProcesses(session string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || !bytes.Contains(b, []byte("--daemon-pipe")) || !bytes.Contains(b, []byte(session)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(d))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// The daemon is SIGKILLed while both its sessions run a long tool: each
// session's ccrelay notices at once (its stdin, which only the daemon
// wrote, ends), stops its Claude without waiting for the tool, says why,
// and exits; the list shows neither as busy any more, each with the
// reason; the machine entry shows its daemon gone and lists no running
// session; every session announced the daemon's --name as its machine.
// Measured: the time from the kill to the last Claude gone and to the
// last session's ccrelay gone.
func TestDaemonKilledMidTool(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc to find the sessions' processes")
	}
	r := newDaemonRig(t, "--cli-gone-after", "2s")
	os.WriteFile(r.script, []byte(`{"turns":[{"steps":[{"text":"running it"},{"tool":{"id":"toolu_long*","name":"Bash","input":{"command":"sleep 600"},"runMs":600000}}]}]}`), 0o644)
	r.startDaemon("--name", "orchard-box")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := dialWSApp(t, ctx, r.base, r.token)
	machine := a.machine()
	var sessions []string
	for _, prompt := range []string{"run the long tool", "run it too"} {
		s := claude.NewSessionID()
		if got := a.command(machine, protocol.Command{Kind: protocol.CommandStart, Dir: r.project, Target: s, Text: prompt}); got != "" {
			t.Fatalf("start refused: %s", got)
		}
		a.until("session "+s+" listed", func() bool { return a.info(s)["startedBy"] == machine })
		a.send(protocol.Frame{Type: protocol.FrameSubscribe, Session: s})
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			a.mu.Lock()
			ok := a.info(s)["status"] == "busy" && a.saw(s, "sleep 600")
			info, saw := a.info(s), a.saw(s, "sleep 600")
			a.mu.Unlock()
			if ok {
				break
			}
			if time.Now().After(deadline) {
				lg, _ := os.ReadFile(filepath.Join(r.state, "ccrelay.log"))
				dl, _ := os.ReadFile(filepath.Join(r.state, "daemon", "daemon.log"))
				t.Fatalf("session %s not running its tool: info %v, saw the call %v\nccrelay.log:\n%s\ndaemon.log:\n%s", s, info, saw, lg, dl)
			}
		}
		sessions = append(sessions, s)
	}
	a.until("the machine lists both running", func() bool {
		running, _ := a.info(machine)["daemon"].(map[string]any)["running"].([]any)
		return len(running) == 2
	})
	a.mu.Lock()
	for _, s := range append([]string{machine}, sessions...) {
		if got := a.info(s)["machine"]; got != "orchard-box" {
			t.Errorf("session %s announces the machine %v, want the daemon's --name orchard-box", s, got)
		}
	}
	a.mu.Unlock()
	var procs []int
	for _, s := range sessions {
		procs = append(procs, sessionProcesses(s)...)
	}
	_, claudes := r.claudes()
	if len(procs) != 2 || len(claudes) != 2 {
		t.Fatalf("before the kill: %d sessions' ccrelay (%v) and %d Claudes (%v), want 2 and 2", len(procs), procs, len(claudes), claudes)
	}

	killed := time.Now()
	r.daemon.Process.Kill()
	r.daemon.Wait()
	r.daemon = nil
	var claudesGone, sessionsGone time.Duration
	for deadline := time.Now().Add(60 * time.Second); claudesGone == 0 || sessionsGone == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("60 s after the kill: Claudes gone after %v, sessions' ccrelay after %v (0: not yet)", claudesGone, sessionsGone)
		}
		if _, alive := r.claudes(); claudesGone == 0 && len(alive) == 0 {
			claudesGone = time.Since(killed)
		}
		if sessionsGone == 0 && !anyAlive(procs) {
			sessionsGone = time.Since(killed)
		}
	}
	t.Logf("daemon SIGKILLed: the last Claude gone after %v, the last session's ccrelay after %v", claudesGone.Round(time.Millisecond), sessionsGone.Round(time.Millisecond))
	// Claude is stopped without waiting for its tool: stdin closed, then
	// SIGTERM after daemonStopTimeout (the bound is generous for a loaded
	// machine; the wait before SIGTERM alone was 5 s).
	if bound := 4 * time.Second; claudesGone > bound || sessionsGone > bound {
		t.Errorf("after the kill: the last Claude gone after %v (bound %v), the last session's ccrelay after %v (bound %v)", claudesGone, bound, sessionsGone, bound)
	}

	for _, s := range sessions {
		a.until("session "+s+" not busy, with the reason", func() bool {
			e, _ := a.info(s)["error"].(string)
			return a.info(s)["status"] == "idle" && strings.Contains(e, "daemon that ran this session stopped") && a.saw(s, "daemon that ran this session stopped")
		})
	}
	// The machine: its daemon's connection is gone (the relay says so once
	// it has not come back within --cli-gone-after), and it runs nothing.
	a.until("the machine shown gone, running nothing", func() bool {
		d, _ := a.info(machine)["daemon"].(map[string]any)
		running, _ := d["running"].([]any)
		gone, _ := a.info(machine)["cliGone"].(float64)
		return gone > 0 && len(running) == 0
	})
	b, _ := json.Marshal(a.info(machine))
	t.Logf("the machine as listed: %s", b)
}

// anyAlive reports whether one of pids runs (a zombie, which has exited
// and waits for whoever adopted it to reap it, does not).
func anyAlive(pids []int) bool {
	for _, p := range pids {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		if i := bytes.LastIndexByte(st, ')'); err == nil && i >= 0 && i+2 < len(st) && st[i+2] == 'Z' {
			continue
		}
		if testutil.ProcessAlive(p) {
			return true
		}
	}
	return false
}
