package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// soakAbortEvery: one turn in this many is aborted instead of allowed.
const soakAbortEvery = 10

// rssKB is the resident memory of process pid, in KB (Linux).
func rssKB(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

// BenchmarkSoak sends b.N prompts through one relay to a remote session
// whose (fake) Claude asks a permission in every turn; the app allows it,
// or aborts the turn one time in soakAbortEvery. It reports commands/s,
// the relay's and the CLI's resident memory at start and end, and the
// commands not in a final state at the end (goal 0).
//
//	go test -run '^$' -bench Soak -benchtime 2000x ./cmd/ccrelay/
//
// With CCRELAY_SOAK_FOR set (a duration: 10m) it runs turns for that long
// instead of b.N, samples both processes' RSS every soakSampleEvery, and
// writes heap profiles of the CLI (HeapProfileEnv, SIGUSR1) after the
// first turn and at the end, and the RSS samples (rss.txt), into
// CCRELAY_SOAK_PROFILES (a folder; a temporary one when unset), to compare
// with go tool pprof -base:
//
//	CCRELAY_SOAK_FOR=10m CCRELAY_SOAK_PROFILES=/tmp/soak go test -run '^$' -bench Soak -benchtime 1x -timeout 30m ./cmd/ccrelay/
func BenchmarkSoak(b *testing.B) {
	buildFakeClaude(b)
	srv := exec.Command(binary, "serve", "--data", b.TempDir(), "--listen", "127.0.0.1:0")
	out, _ := srv.StdoutPipe()
	srv.Stderr = io.Discard
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	sc := bufio.NewScanner(out)
	re := regexp.MustCompile(`app:\s+(http://[0-9.:]+)/#token=([0-9a-f]+)`)
	var base, token string
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			base, token = m[1], m[2]
			break
		}
	}
	go io.Copy(io.Discard, out)
	if base == "" {
		b.Fatal("serve printed no app URL")
	}
	home, project, state := b.TempDir(), b.TempDir(), b.TempDir()
	script := filepath.Join(b.TempDir(), "stream.json")
	os.WriteFile(script, []byte(`{"turns":[{"steps":[{"tool":{"id":"toolu_*","name":"Bash","input":{"command":"ls"},"ask":true,"result":"ok"}},{"text":"ran"}]}]}`), 0o644)
	const session = "77777777-2222-4333-8444-555555555555"
	cli := exec.Command(binary, "--remote", "--session", session, "--claude", fakeClaude, "--state", state, "--relay", base, "--relay-token", token)
	cli.Dir = project
	soakFor, _ := time.ParseDuration(os.Getenv("CCRELAY_SOAK_FOR"))
	profiles := cmp.Or(os.Getenv("CCRELAY_SOAK_PROFILES"), b.TempDir())
	if err := os.MkdirAll(profiles, 0o700); err != nil {
		b.Fatal(err)
	}
	cli.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_STREAM=" + script}
	if soakFor > 0 {
		// Every 4 KB allocated sampled (512 KB by default): the profiles
		// show small maps and slices that grow.
		cli.Env = append(cli.Env, HeapProfileEnv+"="+filepath.Join(profiles, "cli"), "GODEBUG=memprofilerate=4096")
	}
	if err := cli.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cli.Process.Signal(syscall.SIGTERM); cli.Wait() }()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	app, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		b.Fatal(err)
	}
	defer app.CloseNow()
	app.SetReadLimit(-1)
	send := func(f protocol.Frame) {
		f.V = protocol.FrameVersion
		buf, _ := json.Marshal(f)
		if err := app.Write(ctx, websocket.MessageText, buf); err != nil {
			b.Fatal(err)
		}
	}
	read := func() protocol.Frame {
		_, buf, err := app.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var f protocol.Frame
		json.Unmarshal(buf, &f)
		return f
	}
	var pending []string
	idle := false
	onSession := func(f protocol.Frame) {
		for _, s := range f.Sessions {
			if s.ID != session {
				continue
			}
			var info struct {
				Status      string `json:"status"`
				Permissions []struct {
					ID string `json:"id"`
				} `json:"permissions"`
			}
			json.Unmarshal(s.Info, &info)
			idle = info.Status == "idle" && strings.Contains(string(s.Info), `"mode":"remote"`)
			pending = pending[:0]
			for _, p := range info.Permissions {
				pending = append(pending, p.ID)
			}
		}
	}
	send(protocol.Frame{Type: protocol.FrameList})
	for !idle {
		if f := read(); f.Type == protocol.FrameSessions || f.Type == protocol.FrameSession {
			onSession(f)
		}
	}
	relayStart, cliStart := rssKB(srv.Process.Pid), rssKB(cli.Process.Pid)

	statuses := map[string]string{}
	answered := map[string]bool{}
	commands, open := 0, 0
	sendCmd := func(c protocol.Command) {
		c.ID = protocol.New()
		statuses[c.ID] = ""
		commands++
		open++
		send(protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &c})
	}
	turns := b.N
	if soakFor > 0 {
		turns = math.MaxInt
	}
	var samples []string
	nextSample := time.Now()
	sample := func(i int) {
		if soakFor == 0 || time.Now().Before(nextSample) {
			return
		}
		nextSample = nextSample.Add(soakSampleEvery)
		line := fmt.Sprintf("turn %d: relay %d KB, cli %d KB", i, rssKB(srv.Process.Pid), rssKB(cli.Process.Pid))
		samples = append(samples, line)
		b.Log(line)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < turns; i++ {
		if soakFor > 0 {
			if i == 1 {
				heapProfile(b, cli.Process, filepath.Join(profiles, "cli.1.heap"))
			}
			if time.Since(start) >= soakFor {
				turns = i
				break
			}
			sample(i)
		}
		before := len(answered)
		sendCmd(protocol.Command{Kind: protocol.CommandPrompt, Text: fmt.Sprint("p", i)})
		// The turn asks; answer it (or abort it), then wait for Claude to be
		// idle again with every command final.
		for turnDone := false; !turnDone; {
			f := read()
			switch f.Type {
			case protocol.FrameStatus:
				if st, ok := statuses[f.Command.ID]; ok && st != protocol.StatusDone && st != protocol.StatusRejected {
					statuses[f.Command.ID] = f.Status
					if f.Status == protocol.StatusDone || f.Status == protocol.StatusRejected {
						open--
					}
				}
			case protocol.FrameSession, protocol.FrameSessions:
				onSession(f)
				for _, r := range pending {
					if answered[r] {
						continue
					}
					answered[r] = true
					if i%soakAbortEvery == soakAbortEvery-1 {
						sendCmd(protocol.Command{Kind: protocol.CommandAbort})
					} else {
						sendCmd(protocol.Command{Kind: protocol.CommandPermission, RequestID: r, Allow: true})
					}
				}
			}
			turnDone = idle && open == 0 && len(answered) > before && len(pending) == 0
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if soakFor > 0 {
		nextSample = time.Now()
		sample(turns)
		end := filepath.Join(profiles, "cli."+strconv.FormatInt(int64(heapProfileCount(profiles)+1), 10)+".heap")
		heapProfile(b, cli.Process, end)
		b.Logf("%d turns in %v; CLI heap profiles: %s (start), %s (end)", turns, elapsed.Round(time.Second), filepath.Join(profiles, "cli.1.heap"), end)
		if err := os.WriteFile(filepath.Join(profiles, "rss.txt"), []byte(strings.Join(samples, "\n")+"\n"), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	notFinal := 0
	for _, st := range statuses {
		if st != protocol.StatusDone && st != protocol.StatusRejected {
			notFinal++
		}
	}
	b.ReportMetric(float64(commands)/elapsed.Seconds(), "commands/s")
	b.ReportMetric(float64(relayStart), "relay-start-KB")
	b.ReportMetric(float64(rssKB(srv.Process.Pid)), "relay-end-KB")
	b.ReportMetric(float64(cliStart), "cli-start-KB")
	b.ReportMetric(float64(rssKB(cli.Process.Pid)), "cli-end-KB")
	b.ReportMetric(float64(notFinal), "not-final")
}

// soakSampleEvery is how often a timed soak samples RSS.
const soakSampleEvery = 30 * time.Second

// heapProfileCount is the number of heap profiles written into dir.
func heapProfileCount(dir string) int {
	m, _ := filepath.Glob(filepath.Join(dir, "cli.[0-9]*.heap"))
	return len(m)
}
