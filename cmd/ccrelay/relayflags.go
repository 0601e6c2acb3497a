package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/internal/config"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/relay"
)

// relayToken finds the credential for the relay at relayURL: --relay-token
// (warned about on stderr: every local user sees it in ps),
// --relay-token-file, $CCRELAY_TOKEN, this machine's credential from
// ccrelay login (the state folder's login.json, in the state folder state,
// "" for the default) when it was made for that relay, or the token file
// of a relay running on this machine (its data folder: data, or the
// default one when relayURL is a loopback address or the relay remembered
// in the state folder). A login for another relay, or the token of the
// relay on this machine, is never sent to a relay elsewhere: that relay
// could act as this machine, or as the local relay's owner, with it.
func relayToken(flag, file, data, state, relayURL string, stderr io.Writer) (string, error) {
	switch {
	case flag != "" && file != "":
		return "", errors.New("give --relay-token or --relay-token-file, not both")
	case flag != "":
		fmt.Fprintln(stderr, "ccrelay: warning: a token given with --relay-token can be read by every user of this machine (ps); use --relay-token-file FILE or CCRELAY_TOKEN")
		return flag, nil
	case file != "":
		return readTokenFile(file)
	}
	if t := os.Getenv("CCRELAY_TOKEN"); t != "" {
		return t, nil
	}
	elsewhere := "" // the relay of a login that is not for this one
	if st, err := stateDir(state); err == nil {
		if l, err := readLogin(st); err == nil {
			if sameRelay(l.Relay, relayURL) {
				return l.Credential, nil // this machine's own (ccrelay login)
			}
			elsewhere = l.Relay
		}
	}
	if data == "" && !isLoopbackURL(relayURL) && !rememberedRelay(state, relayURL) {
		if elsewhere != "" {
			return "", fmt.Errorf("no relay token for %s: this machine's login is for %s, and its credential goes to that relay only; run ccrelay login %s CODE (a code from ccrelay pair --machine), or give --relay-token-file", relayURL, elsewhere, relayURL)
		}
		return "", fmt.Errorf("no relay token for %s: run ccrelay login %s CODE (a code from ccrelay pair --machine), give --relay-token-file, or set CCRELAY_TOKEN (the token of a relay on this machine goes only to an address of this machine, or to the relay ccrelay pair remembered)", relayURL, relayURL)
	}
	dir, err := dataDir(data)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(dir, relay.TokenFile))
	if err != nil && elsewhere != "" {
		return "", fmt.Errorf("no relay token for %s: this machine's login is for %s, and its credential goes to that relay only; run ccrelay login %s CODE (a code from ccrelay pair --machine), or give --relay-token-file", relayURL, elsewhere, relayURL)
	}
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no relay token: no relay has run on this machine (run ccrelay setup, or ccrelay serve); for a relay elsewhere, run ccrelay login, give --relay-token-file or set CCRELAY_TOKEN (%v)", err)
	}
	if err != nil {
		return "", fmt.Errorf("no relay token: run ccrelay login, give --relay-token-file, set CCRELAY_TOKEN, or run the relay on this machine (%v)", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// maxTokenFile bounds what --relay-token-file reads.
const maxTokenFile = 4 << 10

// readTokenFile reads a token file once, trimmed. A file that group or
// others may read is refused: the token is as good as running code on
// this machine.
func readTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("--relay-token-file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("--relay-token-file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("--relay-token-file: %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("--relay-token-file: %s can be read by group or others (mode %04o); make it private with: chmod 600 %s", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("--relay-token-file: %w", err)
	}
	if len(b) > maxTokenFile {
		return "", fmt.Errorf("--relay-token-file: %s is larger than %d bytes: not a token file", path, maxTokenFile)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("--relay-token-file: %s is empty", path)
	}
	return t, nil
}

// relaySender sends envelopes of one session to a relay through a durable
// outbox in stateDir, batching appends.
type relaySender struct {
	box     *apiclient.Outbox
	client  *apiclient.Client
	session string
	pending []protocol.Envelope
	cancel  context.CancelFunc
	done    chan error
	// notes is the notice writer (nil: none): it keeps the last notice
	// for finish to say again while it waits.
	notes *lastNotice
}

// lastNotice passes notices on to w and keeps the last one.
type lastNotice struct {
	w    io.Writer
	mu   sync.Mutex
	last string
}

func (n *lastNotice) Write(p []byte) (int, error) {
	n.mu.Lock()
	n.last = strings.TrimSpace(string(p))
	n.mu.Unlock()
	return n.w.Write(p)
}

func (n *lastNotice) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.last
}

// finishSay is how long finish waits silently for the relay before it
// says what it waits for (and why the relay has not taken it, if known).
const finishSay = 2 * time.Second

func startRelaySender(url, token, stateDir, session string, log *slog.Logger) (*relaySender, error) {
	return startRelaySenderNotice(url, token, stateDir, session, log, nil, nil)
}

// openOutboxLog, when set (tests), opens the outbox's log file: a test
// makes its writes fail as on a full disk.
var openOutboxLog func(path string) (apiclient.LogFile, error)

// startRelaySenderNotice starts sending; notice (stderr) hears when the
// relay cannot be reached and when it is reached again.
// With a keyring, the session is sealed once the machine trusts a device.
func startRelaySenderNotice(url, token, stateDir, session string, log *slog.Logger, notice io.Writer, kr *apiclient.Keyring) (*relaySender, error) {
	opts := apiclient.OutboxOptions{Logger: log, OpenLog: openOutboxLog, Relay: url}
	if kr != nil {
		opts.Sealer = kr
	}
	box, err := apiclient.OpenOutboxWith(stateDir, opts)
	if err != nil {
		return nil, err
	}
	var notes *lastNotice
	if notice != nil {
		tellHeld(notice, box)
		notes = &lastNotice{w: notice}
		notice = notes
	}
	rs := &relaySender{box: box, session: session, done: make(chan error, 1), notes: notes,
		client: apiclient.NewClient(apiclient.Config{URL: url, Token: token, Logger: log, Notice: notice, Keyring: kr}, box)}
	ctx, cancel := context.WithCancel(context.Background())
	rs.cancel = cancel
	go func() { rs.done <- rs.client.Run(ctx) }()
	return rs, nil
}

func (rs *relaySender) emit(e *protocol.Envelope) error {
	rs.pending = append(rs.pending, *e)
	if len(rs.pending) >= 200 {
		return rs.sync()
	}
	return nil
}

func (rs *relaySender) sync() error {
	if len(rs.pending) == 0 {
		return nil
	}
	if err := rs.box.Append(context.Background(), rs.session, rs.pending); err != nil {
		return err // kept: the next sync tries again
	}
	rs.pending = rs.pending[:0]
	return nil
}

// finish appends what is left and waits until the relay acknowledged all,
// for as long as the relay confirms something: it gives up once the relay
// has confirmed nothing for stall (a large replay to a slow relay may
// take longer than that in all).
func (rs *relaySender) finish(ctx context.Context, stall time.Duration) error {
	defer rs.box.Close()
	if err := rs.sync(); err != nil {
		return err
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	flushErr := make(chan error, 1)
	go func() { flushErr <- rs.client.Flush(fctx) }()
	// What was said about the relay may be screens above (the session's
	// output came after it): a wait that lasts says again what it is for.
	say := time.NewTimer(finishSay)
	defer say.Stop()
	look := time.NewTicker(max(min(stall/10, time.Second), time.Millisecond))
	defer look.Stop()
	left, progress := rs.box.Pending(), time.Now()
	var err error
wait:
	for {
		select {
		case err = <-flushErr:
			break wait
		case err = <-rs.done: // the client gave up (token refused)
			if err == nil {
				err = <-flushErr
			}
			break wait
		case <-look.C:
			if n := rs.box.Pending(); n < left {
				left, progress = n, time.Now()
			} else if time.Since(progress) >= stall {
				cancel()
				<-flushErr
				err = fmt.Errorf("the relay confirmed nothing for %s: %d bytes not sent stay on disk and go with the next run to this relay", stall, rs.box.Pending())
				break wait
			}
		case <-say.C:
			if rs.notes != nil {
				why := ""
				if last := rs.notes.String(); strings.Contains(last, "cannot reach") {
					last, _, _ = strings.Cut(last, "; retrying")
					last, _, _ = strings.Cut(last, "; the envelopes are kept")
					why = ": " + strings.TrimPrefix(last, "ccrelay: ")
				}
				fmt.Fprintf(rs.notes.w, "ccrelay: waiting for the relay to take %d bytes not sent yet%s (given up once it confirms nothing for %s); Ctrl-C stops, and they stay on disk for the next run\n",
					rs.box.Pending(), why, stall)
			}
		}
	}
	rs.cancel()
	return err
}

// syncIfAny appends what is batched; a nil sender does nothing.
func (rs *relaySender) syncIfAny() {
	if rs != nil {
		_ = rs.sync()
	}
}

// tellHeld tells the user of the envelopes an outbox keeps for other relays
// than the one named now: they wait for their relay, which no other gets.
func tellHeld(w io.Writer, box *apiclient.Outbox) {
	for _, h := range box.Held() {
		fmt.Fprintf(w, "ccrelay: %s\n", apiclient.HeldNotice(h))
	}
}

// sameRelay reports whether the relay URLs a and b name the same relay
// (a trailing slash, spaces, the case of the scheme and host aside).
func sameRelay(a, b string) bool {
	norm := func(u string) string {
		c, err := apiclient.CheckURL(u)
		if err != nil {
			return ""
		}
		if pu, err := neturl.Parse(c); err == nil {
			pu.Scheme, pu.Host = strings.ToLower(pu.Scheme), strings.ToLower(pu.Host)
			return pu.String()
		}
		return c
	}
	na := norm(a)
	return na != "" && na == norm(b)
}

// rememberedRelay reports whether relayURL is the relay remembered in the
// state folder state ("": the default) by ccrelay pair or ccrelay login.
func rememberedRelay(state, relayURL string) bool {
	st, err := stateDir(state)
	if err != nil {
		return false
	}
	cfg, err := config.Load(st)
	return err == nil && cfg.Relay != "" && sameRelay(cfg.Relay, relayURL)
}
