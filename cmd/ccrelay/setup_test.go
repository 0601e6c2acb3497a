package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/config"
	"github.com/ccrelay/ccrelay/seal"
)

// setupRig is a fresh HOME for ccrelay setup, with a fake systemctl on
// PATH that runs a unit's ExecStart in the background as systemd would
// (and stops it), and optionally a fake tailscale that records its
// arguments and answers status --json with a given answer.
type setupRig struct {
	home, bin, cfg string
	calls, tsCalls string // what systemctl and tailscale were asked
	pidfile, log   string // the relay the fake systemd runs
	port           int
	env            []string
	// wrap, when set, changes each command a recipe runs (e.g. to run it
	// in a namespace of its own); listenAt, when set, is where a recipe's
	// ccrelay serve listens (default 127.0.0.1:port).
	wrap     func(*exec.Cmd) *exec.Cmd
	listenAt string
	// proxyAt and proxyName: where a recipe's caddy run listens, and the
	// name it gets a certificate for.
	proxyAt, proxyName string
}

// tsRunning is tailscale status --json of a machine logged in, with
// HTTPS certificates on.
const tsRunning = `{"Version":"1.76.1","BackendState":"Running","Self":{"DNSName":"laptop.tail1234.ts.net.","HostName":"laptop","Online":true},"CertDomains":["laptop.tail1234.ts.net"],"CurrentTailnet":{"Name":"dev@example.com","MagicDNSSuffix":"tail1234.ts.net","MagicDNSEnabled":true}}`

func newSetupRig(t *testing.T, tailscaleStatus string) *setupRig {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the fake service manager is systemd's; TestServiceFor checks the others' files")
	}
	base := t.TempDir()
	r := &setupRig{home: filepath.Join(base, "home"), bin: filepath.Join(base, "bin"), calls: filepath.Join(base, "systemctl.calls"),
		tsCalls: filepath.Join(base, "tailscale.calls"), pidfile: filepath.Join(base, "relay.pid"), log: filepath.Join(base, "relay.log"), port: freePort(t)}
	r.cfg = filepath.Join(r.home, ".config")
	for _, d := range []string{r.home, r.bin} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	systemctl := `#!/bin/sh
echo "$*" >> '` + r.calls + `'
unit='` + filepath.Join(r.cfg, "systemd", "user") + `'/"$4"
case "$2 $3" in
"enable --now")
	line=$(sed -n 's/^ExecStart=//p' "$unit")
	eval "set -- $line"
	nohup "$@" < /dev/null >> '` + r.log + `' 2>&1 &
	echo $! >> '` + r.pidfile + `' ;;
"disable --now")
	[ -f '` + r.pidfile + `' ] && kill $(cat '` + r.pidfile + `') && rm '` + r.pidfile + `' ;;
esac
`
	writeExec(t, filepath.Join(r.bin, "systemctl"), systemctl)
	if tailscaleStatus != "" {
		status := filepath.Join(base, "tailscale.json")
		writeFile(t, status, []byte(tailscaleStatus))
		writeExec(t, filepath.Join(r.bin, "tailscale"), `#!/bin/sh
echo "$*" >> '`+r.tsCalls+`'
case "$1" in
status) cat '`+status+`' ;;
serve) printf 'Available within your tailnet:\n\nhttps://laptop.tail1234.ts.net/\n|-- proxy %s\n\nServe started and running in the background.\n' "$3" ;;
esac
`)
	}
	// PATH holds only the rig's folder, with the few tools the fakes and
	// the recipes use: a tailscale, systemctl or claude of the machine
	// running the tests is never found.
	for _, tool := range []string{"sh", "bash", "sed", "cat", "nohup", "rm", "openssl"} {
		if p, err := exec.LookPath(tool); err == nil {
			if err := os.Symlink(p, filepath.Join(r.bin, tool)); err != nil {
				t.Fatal(err)
			}
		}
	}
	r.env = []string{"HOME=" + r.home, "XDG_CONFIG_HOME=" + r.cfg, "PATH=" + r.bin}
	t.Cleanup(func() { r.stopRelay(t) })
	return r
}

func writeExec(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

// stopRelay ends what the fake systemd started, and waits until it is
// gone.
func (r *setupRig) stopRelay(t *testing.T) {
	b, _ := os.ReadFile(r.pidfile)
	for _, line := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(line)
		if err != nil {
			continue
		}
		p, err := os.FindProcess(pid)
		if err != nil {
			continue
		}
		alive := func() bool { return p.Signal(syscall.Signal(0)) == nil }
		p.Signal(syscall.SIGTERM)
		deadline := time.Now().Add(15 * time.Second)
		for alive() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if alive() {
			p.Kill()
		}
	}
	if t.Failed() {
		log, _ := os.ReadFile(r.log)
		t.Logf("the relay's log:\n%s", log)
	}
}

// freePort is a TCP port free on 127.0.0.1 a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// setupRun is a ccrelay setup running in the background.
type setupRun struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	more chan struct{} // a line came
	done chan error
}

func (r *setupRig) startSetup(t *testing.T, args ...string) *setupRun {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"setup", "--port", strconv.Itoa(r.port)}, args...)...)
	cmd.Dir = r.home
	cmd.Env = r.env
	return startRun(t, cmd)
}

// startRun starts cmd in the background, collecting its output.
func startRun(t *testing.T, cmd *exec.Cmd) *setupRun {
	t.Helper()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	s := &setupRun{cmd: cmd, more: make(chan struct{}, 1), done: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.mu.Lock()
			s.out.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			select {
			case s.more <- struct{}{}:
			default:
			}
		}
	}()
	go func() { err := cmd.Wait(); pw.Close(); s.done <- err }()
	t.Cleanup(func() {
		cmd.Process.Kill()
	})
	return s
}

func (s *setupRun) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// waitFor waits until the output matches re, and returns the match.
func (s *setupRun) waitFor(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	deadline := time.After(within)
	for {
		if m := re.FindStringSubmatch(s.output()); m != nil {
			return m
		}
		select {
		case <-s.more:
		case err := <-s.done:
			s.done <- err
			if m := re.FindStringSubmatch(s.output()); m != nil {
				return m
			}
			t.Fatalf("the command ended (%v) without %s:\n%s", err, re, s.output())
		case <-deadline:
			t.Fatalf("the command printed no %s within %v:\n%s", re, within, s.output())
		}
	}
}

// wait waits for setup to end and returns its error.
func (s *setupRun) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case err := <-s.done:
		s.done <- err
		return err
	case <-time.After(within):
		t.Fatalf("the command did not end within %v:\n%s", within, s.output())
		return nil
	}
}

var pairLinkRe = regexp.MustCompile(`open:\s+(https://\S+#pair=\S+)`)

// With tailscale installed and logged in, setup needs no flag: it runs the
// relay as a user service on 127.0.0.1 behind tailscale serve, with the
// tailnet name as its public URL; the phone's link is on that name;
// once the phone pairs, its key is confirmed, the relay is remembered as
// this machine's, and setup ends with the one line to run.
func TestSetupTailscale(t *testing.T) {
	r := newSetupRig(t, tsRunning)
	s := r.startSetup(t)
	m := s.waitFor(t, pairLinkRe, time.Minute)
	if !strings.HasPrefix(m[1], "https://laptop.tail1234.ts.net/#pair=") {
		t.Errorf("the link is not on the tailnet name: %s", m[1])
	}
	local := loopbackURL("http", r.port)
	phone, _ := seal.GenerateKeyPair()
	if !pairAsApp(t, local, m[1], phone) {
		t.Fatal("the app refused the pairing")
	}
	if err := s.wait(t, time.Minute); err != nil {
		t.Fatalf("setup: %v\n%s", err, s.output())
	}
	out := s.output()
	for _, want := range []string{"through Tailscale at https://laptop.tail1234.ts.net", "Paired \"phone\": its key is confirmed", "Remembered " + local, "\n  ccrelay\n", "\n  ccrelay follow install\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("setup's output lacks %q:\n%s", want, out)
		}
	}
	ts, _ := os.ReadFile(r.tsCalls)
	if want := "status --json\nserve --bg " + local + "\n"; string(ts) != want {
		t.Errorf("tailscale was asked:\n%s\nwant:\n%s", ts, want)
	}
	unit, err := os.ReadFile(filepath.Join(r.cfg, "systemd", "user", relayService.unit))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"serve" "--data" "` + filepath.Join(r.home, ".local", "share", "ccrelay") + `"`, `"--listen" "127.0.0.1:` + strconv.Itoa(r.port) + `"`,
		`"--behind-proxy" "127.0.0.1" "--public-url" "https://laptop.tail1234.ts.net"`} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("the unit lacks %s:\n%s", want, unit)
		}
	}
	calls, _ := os.ReadFile(r.calls)
	if want := "--user daemon-reload\n--user enable --now ccrelay-relay.service\n"; string(calls) != want {
		t.Errorf("systemctl calls:\n%s\nwant:\n%s", calls, want)
	}
	cfg, err := config.Load(filepath.Join(r.home, ".local", "state", "ccrelay"))
	if err != nil || cfg.Relay != local || cfg.CAFile != "" {
		t.Errorf("remembered %+v, %v; want %s", cfg, err, local)
	}

	// Again: the relay answers already and is used as it is.
	s = r.startSetup(t)
	m = s.waitFor(t, pairLinkRe, time.Minute)
	// Said of the relay that answers, not of the service: the relay may
	// run by hand, as setup advises where the user has no systemd.
	if !strings.Contains(s.output(), "A relay with the flags of "+filepath.Join(r.home, ".config", "systemd", "user", "ccrelay-relay.service")+" answers already: using it as it is.") {
		t.Errorf("second setup:\n%s", s.output())
	}
	if !pairAsApp(t, local, m[1], phone) {
		t.Fatal("the app refused the second pairing")
	}
	if err := s.wait(t, time.Minute); err != nil {
		t.Fatalf("second setup: %v\n%s", err, s.output())
	}
	if calls2, _ := os.ReadFile(r.calls); string(calls2) != string(calls) {
		t.Errorf("the second setup touched the service:\n%s", calls2)
	}
}

// Each way's failure says what to do, before anything is started.
func TestSetupFailuresSayWhatToDo(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		args         []string
		want         string
	}{
		{"tailscale not installed", "", []string{"--tailscale"}, "tailscale is not installed (https://tailscale.com/download)"},
		{"tailscale logged out", `{"BackendState":"NeedsLogin","CertDomains":null}`, []string{"--tailscale"}, "tailscale is NeedsLogin, not logged in: run tailscale up"},
		{"tailscale without certificates", `{"BackendState":"Running","Self":{"DNSName":"laptop.tail1234.ts.net."}}`, nil, "turn on MagicDNS and HTTPS Certificates"},
		{"tailscale daemon down", `not json`, []string{"--tailscale"}, "is tailscaled running?"},
		{"two ways", "", []string{"--lan", "--tailscale"}, "choose one of --tailscale, --lan and --acme"},
		{"acme without a name", "", []string{"--acme", "relay"}, "give the server's DNS name"},
		{"acme for a name that does not resolve", "", []string{"--acme", "relay.invalid"}, "point its DNS at this machine first"},
		{"acme's options without --acme", "", []string{"--listen", ":443"}, "--acme-directory and --listen go with --acme"},
		{"acme with a listen address without a port", "", []string{"--acme", "relay.example.com", "--listen", "relay.example.com"}, "give an address and port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSetupRig(t, tc.status)
			var ee *exec.ExitError
			s := r.startSetup(t, tc.args...)
			err := s.wait(t, time.Minute)
			if !errors.As(err, &ee) || !strings.Contains(s.output(), tc.want) {
				t.Errorf("setup %v: %v\n%s\nwant %q", tc.args, err, s.output(), tc.want)
			}
			if _, err := os.Stat(r.calls); err == nil {
				t.Error("a service was started")
			}
		})
	}
}

// A port another program holds is said, with what to do.
func TestSetupPortTaken(t *testing.T) {
	r := newSetupRig(t, tsRunning)
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(r.port))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := r.startSetup(t)
	if err := s.wait(t, time.Minute); err == nil || !strings.Contains(s.output(), "is taken by a program that is not a relay of ccrelay setup's") || !strings.Contains(s.output(), "--port") {
		t.Errorf("setup with the port taken: %v\n%s", err, s.output())
	}
}

// Where the user has no systemd of their own (a container, a login
// without a user manager), starting the service fails: setup says what to
// do instead of only systemctl's words.
func TestSetupWithoutUserSystemd(t *testing.T) {
	r := newSetupRig(t, tsRunning)
	writeExec(t, filepath.Join(r.bin, "systemctl"), "#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n")
	s := r.startSetup(t)
	err := s.wait(t, time.Minute)
	for _, want := range []string{"no systemd of its own", "loginctl enable-linger", "ccrelay serve --listen 127.0.0.1:" + strconv.Itoa(r.port) + " --behind-proxy 127.0.0.1 --public-url https://laptop.tail1234.ts.net", "then run ccrelay setup again"} {
		if err == nil || !strings.Contains(s.output(), want) {
			t.Errorf("setup without a user systemd: %v, lacks %q\n%s", err, want, s.output())
		}
	}
}

// A relay of the person's own already on the port, without HTTPS for
// phones, is not taken for one: setup says to stop it or use another port.
func TestSetupOwnRelayWithoutHTTPS(t *testing.T) {
	r := newSetupRig(t, tsRunning)
	srv, _, _ := startServe(t, filepath.Join(r.home, ".local", "share", "ccrelay"), "--listen", "127.0.0.1:"+strconv.Itoa(r.port))
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	s := r.startSetup(t)
	err := s.wait(t, time.Minute)
	if err == nil || !strings.Contains(s.output(), "which is not HTTPS") || !strings.Contains(s.output(), "stop it") {
		t.Errorf("setup beside a plain relay: %v\n%s", err, s.output())
	}
	if _, err := os.Stat(r.calls); err == nil {
		t.Error("a service was started beside the running relay")
	}
	if ts, _ := os.ReadFile(r.tsCalls); strings.Contains(string(ts), "serve") {
		t.Errorf("tailscale serve was put in front of a relay not set up for it:\n%s", ts)
	}
}

// The relay's service has names of its own on every platform, apart from
// the daemon's (installing one never replaces the other), and says what
// it is.
func TestRelayServiceFiles(t *testing.T) {
	for _, tc := range []struct {
		goos, path, enable string
	}{
		{"linux", "/home/me/.config/systemd/user/ccrelay-relay.service", "systemctl --user enable --now ccrelay-relay.service"},
		{"darwin", "/home/me/Library/LaunchAgents/dev.ccrelay.relay.plist", "launchctl bootstrap gui/501 /home/me/Library/LaunchAgents/dev.ccrelay.relay.plist"},
		{"windows", `C:\Users\me\AppData\Roaming/ccrelay/relay.cmd`, "schtasks /Run /TN ccrelay-relay"},
	} {
		t.Run(tc.goos, func(t *testing.T) {
			env := serviceEnv{ID: relayService, GOOS: tc.goos, Home: "/home/me", UID: 501, Args: []string{"/usr/bin/ccrelay", "serve", "--data", "/home/me/data"}}
			if tc.goos == "windows" {
				env.ConfigHome = `C:\Users\me\AppData\Roaming`
			}
			svc, err := serviceFor(env)
			if err != nil {
				t.Fatal(err)
			}
			if filepath.ToSlash(svc.Path) != filepath.ToSlash(tc.path) {
				t.Errorf("path %s, want %s", svc.Path, tc.path)
			}
			var enable []string
			for _, c := range svc.Enable {
				enable = append(enable, strings.Join(c, " "))
			}
			if !slices.Contains(enable, tc.enable) {
				t.Errorf("enabled with %q, want %q among them", enable, tc.enable)
			}
			if strings.Contains(svc.Content, "daemon") || !strings.Contains(svc.Content, "serve") {
				t.Errorf("content:\n%s", svc.Content)
			}
			env.ID = serviceID{}
			daemon, _ := serviceFor(env)
			if daemon.Path == svc.Path {
				t.Errorf("the daemon's service has the relay's path %s", svc.Path)
			}
		})
	}
}

// Run with go run, ccrelay is a file go run deletes when it ends: setup
// and daemon install refuse to make a service of it, and say to install
// ccrelay first.
func TestServiceRefusesGoRunBinary(t *testing.T) {
	r := newSetupRig(t, tsRunning)
	dir := filepath.Join(t.TempDir(), "go-build2769823", "b001", "exe")
	os.MkdirAll(dir, 0o700)
	b, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "ccrelay")
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"setup", "--port", strconv.Itoa(r.port)}, {"daemon", "install", "--relay", "https://relay.example.com", "--relay-token-file", tmp}} {
		cmd := exec.Command(tmp, args...)
		cmd.Env = r.env
		run := startRun(t, cmd)
		if err := run.wait(t, time.Minute); err == nil || !strings.Contains(run.output(), "go install github.com/ccrelay/ccrelay/cmd/ccrelay@latest") {
			t.Errorf("%v from go run's folder: %v\n%s", args, err, run.output())
		}
	}
	if _, err := os.Stat(r.calls); err == nil {
		t.Error("a service was started")
	}
}
