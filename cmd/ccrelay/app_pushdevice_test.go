package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// This browser's id for notifications is kept apart from pairing's
// {name, fingerprint} (both were once under ccrelay.device): an id kept
// there by an earlier version is moved to ccrelay.push-device (so its push
// subscription stays this device's), pairing's JSON is left where it is
// and never taken for an id, and the relay takes the id the page sends.
func TestAppPushDeviceKeptApart(t *testing.T) {
	const oldID = "k3v9q2m8x4t7w1z5b6n0c2d4"
	const paired = `{"name":"Test phone","fingerprint":"AB12-CD34"}`
	for _, tc := range []struct {
		name                 string
		old, kept            string // ccrelay.device, ccrelay.push-device before
		wantID, wantOld      string // "" wantID: a new id
		wantOldKept, wantNew bool
	}{
		{name: "id of an earlier version", old: oldID, wantID: oldID},
		{name: "pairing's JSON", old: paired, wantOld: paired, wantOldKept: true, wantNew: true},
		{name: "kept apart already", old: paired, kept: oldID, wantID: oldID, wantOld: paired, wantOldKept: true},
		{name: "nothing yet", wantNew: true},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			r := startAppRelay(t)
			ctx := newBrowser(t)
			must(t, ctx, chromedp.Navigate(r.base+"/#token="+r.token))
			waitJS(t, ctx, "the app", `!!document.querySelector('.top')`)
			set := func(k, v string) string {
				if v == "" {
					return fmt.Sprintf(`localStorage.removeItem(%q);`, k)
				}
				return fmt.Sprintf(`localStorage.setItem(%q, %q);`, k, v)
			}
			must(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => {`+set("ccrelay.device", tc.old)+set("ccrelay.push-device", tc.kept)+`})()`))
			must(t, ctx, chromedp.Reload())
			waitJS(t, ctx, "the app again", `!!document.querySelector('.top') && !!window.ccrelay.device`)
			type state struct {
				Device, Kept string
				Old          *string
			}
			got := eval[state](t, ctx, `({ device: ccrelay.device, kept: localStorage.getItem('ccrelay.push-device'), old: localStorage.getItem('ccrelay.device') })`)
			if got.Kept != got.Device {
				t.Errorf("the id in use %q, kept %q", got.Device, got.Kept)
			}
			if tc.wantID != "" && got.Device != tc.wantID {
				t.Errorf("id %q, want %q", got.Device, tc.wantID)
			}
			if tc.wantNew && (got.Device == oldID || !pushDeviceID.MatchString(got.Device)) {
				t.Errorf("id %q, want a new one", got.Device)
			}
			if tc.wantOldKept != (got.Old != nil) || (got.Old != nil && *got.Old != tc.wantOld) {
				old := "(none)"
				if got.Old != nil {
					old = *got.Old
				}
				t.Errorf("ccrelay.device %q, want %q (kept: %v)", old, tc.wantOld, tc.wantOldKept)
			}
			// The relay takes the id: the page's visibility frame is not
			// refused (the relay answers frames in order: an error for it
			// comes before the list asked after it).
			waitJS(t, ctx, "the connection", `document.body.dataset.conn === 'open'`)
			must(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => {
				window.heard = [];
				ccrelay.conn.ws.addEventListener('message', (e) => heard.push(JSON.parse(e.data)));
				ccrelay.conn.send({ type: 'visibility', device: ccrelay.device, session: '', visible: true });
				ccrelay.conn.send({ type: 'list' });
			})()`))
			waitJS(t, ctx, "the list after the visibility", `heard.some((f) => f.type === 'sessions')`)
			if s := eval[string](t, ctx, `JSON.stringify(heard.filter((f) => f.type === 'error'))`); s != "[]" {
				t.Errorf("the relay refused the device id: %s", s)
			}
		})
	}
}

// pushDeviceID is the relay's form of a device id (relay.deviceIDPattern).
var pushDeviceID = regexp.MustCompile(`^[A-Za-z0-9_-]{16,64}$`)
