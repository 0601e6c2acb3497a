package apiclient

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ccrelay/ccrelay/protocol"
)

// Session keys to the relay (docs/security.md, "Session keys"): before a
// session's first sealed batch, and for every session the machine has a
// key for when a trusted device joins, the client wraps the session's key
// for each device that is both trusted here and listed by the relay (a
// revoked device is not) and sends them.

// setDevices records the relay's list of the account's keyed devices.
func (c *Client) setDevices(devs []protocol.DeviceInfo) {
	c.mu.Lock()
	c.devices = devs
	c.devicesKnown = true
	c.keysDirty = true
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// keyTargets are the trusted devices the relay lists.
func (c *Client) keyTargets() ([]TrustedDevice, error) {
	trusted, err := c.cfg.Keyring.Trusted()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	listed := c.devices
	c.mu.Unlock()
	return slices.DeleteFunc(trusted, func(d TrustedDevice) bool {
		return !slices.ContainsFunc(listed, func(l protocol.DeviceInfo) bool { return l.ID == d.ID })
	}), nil
}

// ensureKeys sends session's keys wrapped for every target they were not
// sent for yet (on this client's life; the relay keeps them). For a
// session this client sends (own), it first starts a new epoch of the
// session's key if a device its current key was shared with is no longer
// a target (revoked on the relay, or no longer trusted here): the devices
// that remain get every epoch, the one that left none of the new ones.
func (c *Client) ensureKeys(ctx context.Context, cn *conn, session string, own bool) error {
	if c.cfg.Keyring == nil {
		return nil
	}
	targets, err := c.keyTargets()
	if err != nil {
		return err
	}
	ids := make([]string, len(targets))
	for i, d := range targets {
		ids[i] = d.ID
	}
	slices.Sort(ids)
	keys, err := c.cfg.Keyring.Keys(session)
	if err != nil {
		return err
	}
	epoch := len(keys) - 1
	c.mu.Lock()
	known := c.devicesKnown
	if own {
		if c.owned == nil {
			c.owned = map[string]bool{}
		}
		c.owned[session] = true
	}
	c.mu.Unlock()
	if own && known {
		had, err := c.cfg.Keyring.SharedWith(session, epoch)
		if err != nil {
			return err
		}
		if gone := slices.DeleteFunc(slices.Clone(had), func(id string) bool { return slices.Contains(ids, id) }); len(gone) > 0 {
			if epoch, err = c.cfg.Keyring.Rotate(session); err != nil {
				return err
			}
			c.log.Info("a device this session's key was shared with is revoked: the session has a new key, for the devices that remain",
				"session", session, "epoch", epoch, "revoked", strings.Join(gone, ","), "devices", len(ids))
		}
	}
	set := fmt.Sprint(epoch, ":", strings.Join(ids, ","))
	c.mu.Lock()
	done := c.keysSent[session] == set
	c.mu.Unlock()
	if done || len(targets) == 0 {
		return nil
	}
	f := protocol.Frame{Type: protocol.FrameKeys, Session: session, Machine: c.cfg.Keyring.MachinePublic()}
	for _, d := range targets {
		w, err := c.cfg.Keyring.Wrap(session, d)
		if err != nil {
			return err
		}
		f.Keys = append(f.Keys, protocol.WrappedKey{Device: d.ID, Wrapped: w})
	}
	// Recorded before they leave: a device that may have them is one to
	// rotate away from if it is revoked.
	if err := c.cfg.Keyring.RecordShared(session, epoch, ids); err != nil {
		return err
	}
	ack, err := cn.request(ctx, f)
	if err != nil {
		return err
	}
	switch {
	case ack.Type == protocol.FrameError && ack.Code == codeDeleted:
		c.markDeleted(session)
		return nil
	case ack.Type == protocol.FrameError && retryable(ack.Code):
		return fmt.Errorf("relay error %s: %s", ack.Code, ack.Message)
	case ack.Type == protocol.FrameError:
		// Refused for what it is (a device revoked meanwhile): the next
		// device list tells what to send.
		c.log.Warn("the relay refused a session's keys", "session", session, "code", ack.Code, "message", ack.Message)
	}
	c.mu.Lock()
	if c.keysSent == nil {
		c.keysSent = map[string]string{}
	}
	c.keysSent[session] = set
	c.mu.Unlock()
	return nil
}

// sendingKeys is ensureKeys for a session about to be sent: the session is
// recorded as this relay's first (keyrelay.go).
func (c *Client) sendingKeys(ctx context.Context, cn *conn, session string) error {
	if c.cfg.Keyring == nil {
		return nil
	}
	if err := c.cfg.Keyring.MarkRelay(session, c.cfg.URL); err != nil {
		return err
	}
	return c.ensureKeys(ctx, cn, session, true)
}

// syncKeys sends the keys of every session the machine has a key for and
// sent to this relay to the devices that lack them (a device trusted later
// sees the history); another relay's sessions are not this one's to know.
func (c *Client) syncKeys(ctx context.Context, cn *conn) error {
	if c.cfg.Keyring == nil {
		return nil
	}
	stamp, err := c.cfg.Keyring.TrustedStamp()
	if err != nil {
		return err
	}
	c.mu.Lock()
	due := c.devicesKnown && (c.keysDirty || stamp != c.trustStamp)
	c.mu.Unlock()
	if !due {
		return nil
	}
	sessions, err := c.cfg.Keyring.Sessions()
	if err != nil {
		return err
	}
	for _, s := range sessions {
		if c.Deleted(s) {
			continue
		}
		if here, err := c.cfg.Keyring.SentTo(s, c.cfg.URL); err != nil || !here {
			if err != nil {
				c.log.Warn("session relays unreadable: its keys are not sent", "session", s, "err", err)
			}
			continue
		}
		c.mu.Lock()
		own := c.owned[s]
		c.mu.Unlock()
		if err := c.ensureKeys(ctx, cn, s, own); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.keysDirty, c.trustStamp = false, stamp
	c.mu.Unlock()
	return nil
}
