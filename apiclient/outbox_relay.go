package apiclient

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// An outbox belongs to one relay (docs/security.md, "Outboxes belong to
// their relay"): its folder names the relay its envelopes were recorded for
// (relayFileName). Opened for another relay, the envelopes it still holds
// are moved aside, to held/<relay>/, where they wait until an outbox in
// that folder is opened for their relay again; another relay never gets
// them. A leftover outbox taken over with Adopt is treated the same way.

const (
	// relayFileName names, in an outbox's folder, the relay its envelopes
	// are for (RelayIdentity).
	relayFileName = "outbox.relay"
	// heldDirName holds, per relay, the envelopes that wait for it.
	heldDirName = "held"
)

// HeldOutbox is what waits in an outbox for another relay than its own.
type HeldOutbox struct {
	Relay     string // RelayIdentity of the relay they were recorded for
	Envelopes int64  // how many
}

// RelayIdentity is a relay's identity as outboxes and keyrings keep it: its
// URL's scheme, host (lower case) and port (without the scheme's default)
// and path, without a trailing slash. Two URLs of one relay have one
// identity.
func RelayIdentity(raw string) string {
	raw = strings.TrimSpace(raw)
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return strings.TrimSuffix(raw, "/")
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	switch {
	case port != "":
		host = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		host = "[" + host + "]"
	}
	return scheme + "://" + host + strings.TrimSuffix(u.Path, "/")
}

// readRelay is the relay the outbox in dir is for ("" if none is named).
func readRelay(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, relayFileName))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// heldPath is the folder, in the outbox folder dir, of what waits for relay.
func heldPath(dir, relay string) string {
	sum := sha256.Sum256([]byte(relay))
	return filepath.Join(dir, heldDirName, hex.EncodeToString(sum[:8]))
}

// bindRelay makes the outbox folder dir the outbox of relay, before its log
// is opened: what its log holds for another relay is held for that one.
func bindRelay(dir, relay string, opts OutboxOptions) error {
	prev := readRelay(dir)
	if prev == relay {
		return nil
	}
	if prev != "" {
		if err := holdLog(dir, prev, opts); err != nil {
			return err
		}
	}
	// An outbox that named no relay (an older ccrelay's) is taken to be for
	// the relay named now, as it was before outboxes named theirs.
	if err := writeFileDurable(filepath.Join(dir, relayFileName), []byte(relay+"\n")); err != nil {
		return fmt.Errorf("open outbox: name its relay: %w", err)
	}
	return nil
}

// holdLog moves the unacknowledged envelopes of the log in dir, recorded
// for relay, to dir's held folder for relay, and removes the log. A crash
// part-way copies them again on the next open (the relay stores an
// envelope id once).
func holdLog(dir, relay string, opts OutboxOptions) error {
	if _, err := os.Stat(filepath.Join(dir, logName)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	src, err := OpenOutboxWith(dir, OutboxOptions{OpenLog: opts.OpenLog, Logger: opts.Logger})
	if err != nil {
		return err
	}
	pending := src.Pending()
	src.Close()
	if pending > 0 {
		h, err := OpenOutboxWith(heldPath(dir, relay), OutboxOptions{OpenLog: opts.OpenLog, Logger: opts.Logger, Relay: relay, held: true})
		if err != nil {
			return fmt.Errorf("hold the envelopes for %s: %w", relay, err)
		}
		_, err = h.adoptLog(dir)
		h.Close()
		if err != nil {
			return fmt.Errorf("hold the envelopes for %s: %w", relay, err)
		}
		opts.Logger.Warn("outbox: envelopes recorded for another relay wait for it", "relay", relay, "envelopes", pending)
	}
	for _, name := range []string{ackedName, logName} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("hold the envelopes for %s: %w", relay, err)
		}
	}
	return nil
}

// takeHeld adds to o what waited for its relay in its held folder, then
// lists what waits for other relays.
func (o *Outbox) takeHeld() error {
	hp := heldPath(o.dir, o.relay)
	if _, err := os.Stat(hp); err == nil {
		n, err := o.adoptLog(hp)
		if err != nil {
			return fmt.Errorf("send what waited for %s: %w", o.relay, err)
		}
		if err := os.RemoveAll(hp); err != nil {
			return fmt.Errorf("send what waited for %s: %w", o.relay, err)
		}
		if n > 0 {
			o.logger.Info("outbox: envelopes kept for this relay go to it now", "relay", o.relay, "envelopes", n)
		}
	}
	return o.scanHeld()
}

// scanHeld lists what waits in o's held folder for other relays; an empty
// held outbox is removed.
func (o *Outbox) scanHeld() error {
	ents, err := os.ReadDir(filepath.Join(o.dir, heldDirName))
	if errors.Is(err, os.ErrNotExist) {
		o.held = nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("outbox: list held envelopes: %w", err)
	}
	var held []HeldOutbox
	for _, e := range ents {
		dir := filepath.Join(o.dir, heldDirName, e.Name())
		relay := readRelay(dir)
		if !e.IsDir() || relay == "" {
			continue
		}
		h, err := OpenOutboxWith(dir, OutboxOptions{OpenLog: o.openLog, Logger: o.logger})
		if err != nil {
			return err
		}
		n, err := h.pendingEnvelopes()
		h.Close()
		if err != nil {
			return err
		}
		if n == 0 {
			os.RemoveAll(dir)
			continue
		}
		held = append(held, HeldOutbox{Relay: relay, Envelopes: n})
	}
	o.mu.Lock()
	o.held = held
	o.mu.Unlock()
	return nil
}

// Held lists the envelopes in o that wait for other relays than its own:
// tell the user (they go once ccrelay names their relay again).
func (o *Outbox) Held() []HeldOutbox {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]HeldOutbox(nil), o.held...)
}

// HeldNotice is the sentence that tells the user of h.
func HeldNotice(h HeldOutbox) string {
	return fmt.Sprintf("%d envelopes recorded for the relay %s wait for it here: no other relay gets them; run ccrelay with --relay %s to send them", h.Envelopes, h.Relay, h.Relay)
}

// holdFrom moves what the outbox in src (recorded for relay) did not send
// to o's held folder for relay.
func (o *Outbox) holdFrom(src, relay string) (int, error) {
	h, err := OpenOutboxWith(heldPath(o.dir, relay), OutboxOptions{OpenLog: o.openLog, Logger: o.logger, Relay: relay, held: true})
	if err != nil {
		return 0, fmt.Errorf("hold the envelopes for %s: %w", relay, err)
	}
	defer h.Close()
	return h.adoptLog(src)
}

// pendingEnvelopes counts the envelopes not yet acknowledged (the log's
// lines after the acknowledged offset), reading the log a piece at a time.
func (o *Outbox) pendingEnvelopes() (int64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var n int64
	buf := make([]byte, 64<<10)
	for off := o.acked; off < o.size; {
		m, err := o.log.ReadAt(buf[:min(int64(len(buf)), o.size-off)], off)
		n += int64(bytes.Count(buf[:m], []byte{'\n'}))
		off += int64(m)
		if err != nil && !(errors.Is(err, io.EOF) && off >= o.size) {
			return n, fmt.Errorf("outbox: count pending envelopes: %w", err)
		}
	}
	return n, nil
}
