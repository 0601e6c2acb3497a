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

// ensureKeys sends session's key wrapped for every target it was not sent
// for yet (on this client's life; the relay keeps them).
func (c *Client) ensureKeys(ctx context.Context, cn *conn, session string) error {
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
	set := strings.Join(ids, ",")
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

// syncKeys sends the keys of every session the machine has a key for to
// the devices that lack them (a device trusted later sees the history).
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
		if err := c.ensureKeys(ctx, cn, s); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.keysDirty, c.trustStamp = false, stamp
	c.mu.Unlock()
	return nil
}
