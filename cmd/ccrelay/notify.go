package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ccrelay/ccrelay/push"
	"github.com/ccrelay/ccrelay/relay"
)

// DefaultPushContact is the contact a relay gives push services in its
// VAPID tokens unless told another (--push-contact).
const DefaultPushContact = "mailto:ccrelay@localhost"

// notifyFlags are serve's notification flags.
type notifyFlags struct {
	ntfy    string // --notify-ntfy: an ntfy topic URL
	contact string // --push-contact
}

// linkBase is the address links to the app start with (ntfy's): the
// public URL when there is one (what phones open: --public-url, --acme),
// else the first of this machine's network addresses a phone reaches
// (listening on every address over HTTPS), else the address listened on.
func (r *runningRelay) linkBase() string {
	if r.public != "" {
		return strings.TrimSuffix(r.public, "/")
	}
	if us := r.networkURLs(); len(us) > 0 {
		return strings.TrimSuffix(us[0], "/")
	}
	return r.base
}

// startNotify turns on the relay's notifications: Web Push with the VAPID
// keys of the store (made on first start, or taken from an older relay's
// key file in the data folder; shared by the relays on one PostgreSQL),
// and ntfy when asked. The senders run until the returned stop is called.
func (r *runningRelay) startNotify(dir string, f notifyFlags) (stop func(), err error) {
	if !strings.HasPrefix(f.contact, "mailto:") && !strings.HasPrefix(f.contact, "https://") {
		return nil, fmt.Errorf("--push-contact %q: want a mailto: or https:// URL", f.contact)
	}
	kctx, kcancel := context.WithTimeout(context.Background(), 30*time.Second)
	keys, err := r.store.PushKeys(kctx, dir)
	kcancel()
	if err != nil {
		return nil, fmt.Errorf("notifications: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stop = func() { cancel(); wg.Wait() }
	wp := push.NewWebPush(keys, f.contact, nil, r.log)
	wg.Go(func() { wp.Run(ctx) })
	o := relay.PushOptions{PublicKey: keys.PublicKey(), WebPush: wp, ImportFile: filepath.Join(dir, relay.PushFile), AppURL: r.linkBase()}
	if f.ntfy != "" {
		n, err := push.NewNtfy(f.ntfy, nil, r.log)
		if err != nil {
			stop()
			return nil, err
		}
		wg.Go(func() { n.Run(ctx) })
		o.Ntfy = n
	}
	if err := r.rs.EnablePush(o); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}
