package main

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/seal"
)

// sealedApp is a paired phone on the relay: it opens what is sealed for
// it with the session keys the relay hands it.
type sealedApp struct {
	*wsApp
	device *seal.KeyPair
	keys   map[string]*seal.SessionKey
}

// key subscribes to session and returns its key, once the relay sent it.
func (p *sealedApp) key(session string, machine *ecdh.PublicKey) *seal.SessionKey {
	p.t.Helper()
	if k := p.keys[session]; k != nil {
		return k
	}
	p.send(protocol.Frame{Type: protocol.FrameSubscribe, Session: session})
	var wrapped string
	p.until("the key of "+session, func() bool {
		for _, f := range p.frames {
			if f.Type == protocol.FrameSessionKey && f.Session == session {
				wrapped = f.Wrapped
				return true
			}
		}
		return false
	})
	k, err := seal.UnwrapKey(p.device, machine, session, wrapped)
	if err != nil {
		p.t.Fatal(err)
	}
	p.keys[session] = k
	return k
}

// summary opens a listed session's sealed summary.
func (p *sealedApp) summary(session string, k *seal.SessionKey) map[string]any {
	p.t.Helper()
	p.mu.Lock()
	sealed, _ := p.info(session)["sealed"].(string)
	p.mu.Unlock()
	if sealed == "" {
		return nil
	}
	b, err := k.Open(seal.AD{Session: session, ID: "announce", Direction: seal.FromMachine}, sealed)
	if err != nil {
		p.t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

// command seals a command to session and returns where it ends.
func (p *sealedApp) sealed(session string, k *seal.SessionKey, c protocol.Command) string {
	p.t.Helper()
	c.ID = protocol.New()
	plain, _ := json.Marshal(c)
	s, err := k.Seal(seal.AD{Session: session, ID: c.ID, Direction: seal.FromDevice}, plain)
	if err != nil {
		p.t.Fatal(err)
	}
	p.send(protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &protocol.Command{ID: c.ID, Kind: c.Kind, Sealed: s}})
	var reason string
	p.until(c.Kind+" answered", func() bool {
		for _, f := range p.frames {
			if f.Type == protocol.FrameStatus && f.Command != nil && f.Command.ID == c.ID && (f.Status == protocol.StatusDone || f.Status == protocol.StatusRejected) {
				reason = f.Message
				if f.SealedMessage != "" { // the machine's reason, sealed
					b, err := k.Open(seal.AD{Session: session, ID: protocol.ResultSealID(c.ID), Direction: seal.FromMachine}, f.SealedMessage)
					if reason = string(b); err != nil {
						reason = "a sealed reason that does not open: " + err.Error()
					}
				}
				if f.Status == protocol.StatusRejected && reason == "" {
					reason = "rejected"
				}
				return true
			}
		}
		return false
	})
	return reason
}

// opened is every envelope of session the app got, opened.
func (p *sealedApp) opened(session string, k *seal.SessionKey) string {
	var out []string
	for _, f := range p.frames {
		if f.Type != protocol.FrameBatch || f.Session != session {
			continue
		}
		for _, it := range f.Items {
			h, err := protocol.DecodeSealed(it.Envelope)
			if err != nil {
				out = append(out, "PLAINTEXT:"+string(it.Envelope))
				continue
			}
			b, err := k.Open(seal.AD{Session: session, ID: h.ID, Direction: seal.FromMachine}, h.Sealed)
			if err == nil {
				out = append(out, string(b))
			}
		}
	}
	return strings.Join(out, "\n")
}

// claudesFor lists the processes whose command line holds s (Linux),
// ccrelay's own left out.
func claudesFor(s string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		argv0, _, _ := bytes.Cut(b, []byte{0})
		if err == nil && bytes.Contains(b, []byte(s)) && filepath.Base(string(argv0)) != "ccrelay" {
			found = append(found, string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	return found
}

// The real Claude Code, started and resumed from a paired phone through
// `ccrelay daemon`: the machine's folders and past sessions reach the phone
// sealed; an unsealed start is refused and starts nothing; a sealed start
// runs Claude in the folder with the first prompt, and it answers; a past
// session (made by Claude Code itself) is resumed and remembers; the
// daemon's SIGTERM ends both Claudes. Neither the relay's database nor any
// frame to the phone holds a folder, a prompt or an answer.
func TestRealClaudeDaemonSealed(t *testing.T) {
	const (
		firstTask = "count the orchard tangerines"
		prompt    = "from the pocket: plant a papaya"
		answer    = "Planted papaya number 771, as asked."
		again     = "from the pocket again: how many tangerines?"
		recall    = "Still 42 tangerines, as counted before."
	)
	e := claudetest.New(t)
	e.API.SetRules(
		fakeapi.Rule{LastUserContains: "count the orchard", Reply: []fakeapi.Block{fakeapi.Text("Counted 42 tangerines.")}},
		fakeapi.Rule{LastUserContains: "plant a papaya", Reply: []fakeapi.Block{fakeapi.Text(answer)}},
		fakeapi.Rule{LastUserContains: "how many tangerines", Reply: []fakeapi.Block{fakeapi.Text(recall)}})
	// A session of Claude Code's own, in the project: the one to resume.
	e.Run(t, nil, "-p", firstTask)
	pastFiles, _ := filepath.Glob(filepath.Join(e.ProjectDir(t), "*.jsonl"))
	if len(pastFiles) != 1 {
		t.Fatalf("Claude Code left %d transcripts", len(pastFiles))
	}
	past := strings.TrimSuffix(filepath.Base(pastFiles[0]), ".jsonl")

	data, state := t.TempDir(), t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	phone, _ := seal.GenerateKeyPair()
	cred, kr := trustedDevice(t, base, token, state, phone)
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte(token), 0o600)
	d := exec.Command(binary, "daemon", "--relay", base, "--relay-token-file", tokenFile, "--state", state, "--claude", e.Claude, "--name", "orchard-box")
	d.Env = e.Environ()
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { d.Process.Kill(); d.Wait() }()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := &sealedApp{wsApp: dialWSApp(t, ctx, base, cred), device: phone, keys: map[string]*seal.SessionKey{}}
	machine := p.machine()
	mpub := kr.Machine().Public()
	mk := p.key(machine, mpub)
	var di protocol.DaemonInfo
	p.until("the folders, sealed", func() bool {
		p.mu.Unlock()
		sum := p.summary(machine, mk)
		p.mu.Lock()
		b, _ := json.Marshal(sum["daemon"])
		di = protocol.DaemonInfo{}
		json.Unmarshal(b, &di)
		return len(di.Folders) == 1
	})
	if di.Folders[0].Dir != e.Project || len(di.Folders[0].Sessions) != 1 || di.Folders[0].Sessions[0].ID != past ||
		di.Folders[0].Sessions[0].Prompt != firstTask || di.ClaudeVersion == "" {
		t.Fatalf("the machine announced %+v", di)
	}

	// Unsealed, a start is refused (by the relay, which knows the
	// machine's session is sealed, and stores nothing of it; the daemon
	// would refuse it too), and nothing starts.
	s1 := claude.NewSessionID()
	if got := p.command(machine, protocol.Command{Kind: protocol.CommandStart, Dir: filepath.Dir(e.Project), Target: s1, Text: "unsealed"}); !strings.Contains(got, "not sealed") {
		t.Fatalf("an unsealed start: %q", got)
	}

	if got := p.sealed(machine, mk, protocol.Command{Kind: protocol.CommandStart, Dir: e.Project, Target: s1, Text: prompt, Mode: "default"}); got != "" {
		t.Fatalf("sealed start refused: %s", got)
	}
	p.until("the new session listed", func() bool { _, ok := p.sessions[s1]; return ok })
	k1 := p.key(s1, mpub)
	p.until("the answer", func() bool { return strings.Contains(p.opened(s1, k1), "papaya number 771") })
	p.mu.Lock()
	o := p.opened(s1, k1)
	p.mu.Unlock()
	if !strings.Contains(o, prompt) || strings.Contains(o, "PLAINTEXT:") {
		t.Fatalf("session 1 as the phone opened it:\n%.3000s", o)
	}

	if got := p.sealed(machine, mk, protocol.Command{Kind: protocol.CommandStart, Dir: e.Project, Target: past, Resume: true}); got != "" {
		t.Fatalf("sealed resume refused: %s", got)
	}
	p.until("the resumed session listed", func() bool { _, ok := p.sessions[past]; return ok })
	k2 := p.key(past, mpub)
	if got := p.sealed(past, k2, protocol.Command{Kind: protocol.CommandPrompt, Text: again}); got != "" {
		t.Fatalf("prompt to the resumed session: %s", got)
	}
	p.until("the resumed session remembers", func() bool { return strings.Contains(p.opened(past, k2), "Still 42 tangerines") })
	// Claude was given the earlier conversation (the first task, its
	// answer, then the new prompt), not a fresh one.
	for _, r := range e.API.Requests() {
		if strings.Contains(r.LastUser, "how many tangerines") && r.Messages < 3 {
			t.Fatalf("the resumed Claude sent %d messages: the earlier conversation is missing", r.Messages)
		}
	}

	if runtime.GOOS == "linux" && len(claudesFor(s1)) == 0 {
		t.Fatal("no Claude runs session 1")
	}
	d.Process.Signal(syscall.SIGTERM)
	if err := d.Wait(); err != nil {
		t.Logf("daemon: %v", err)
	}
	if runtime.GOOS == "linux" {
		for _, s := range []string{s1, past} {
			if left := claudesFor(s); len(left) > 0 {
				t.Errorf("Claude left running for %s: %v", s, left)
			}
		}
	}

	var disk []byte
	for _, name := range []string{"relay.db", "relay.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(data, name))
		disk = append(disk, b...)
	}
	p.mu.Lock()
	var seen []byte
	for _, f := range p.frames {
		b, _ := json.Marshal(f)
		seen = append(seen, b...)
	}
	p.mu.Unlock()
	for _, s := range []string{e.Project, prompt, "papaya number 771", again, "Still 42", firstTask} {
		if bytes.Contains(disk, []byte(s)) {
			t.Errorf("the relay's database holds %q", s)
		}
		if bytes.Contains(seen, []byte(s)) {
			t.Errorf("a frame to the phone holds %q", s)
		}
	}
}
