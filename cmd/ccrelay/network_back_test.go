package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/testutil"
)

// Back at once when the network returns: the phone moves into a dead zone
// (a network change; the socket it had freezes), the attempt it starts
// there is lost, and when the network returns — said by an online event, a
// network change, or the page becoming visible again — the app drops that
// attempt and is connected and current within 2 s, instead of waiting out
// its 10-s connect timeout. Default timing, as users get it.
func TestAppBackWhenNetworkReturns(t *testing.T) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	p := testutil.StartFaultProxy(t, strings.TrimPrefix(r.base, "http://"))
	ctx := newBrowser(t)
	must(t, ctx, phone())
	openVia(t, ctx, "http://"+p.Addr, r.token, "", id)
	cli := dialCLI(t, r) // straight to the relay: its link stays up
	if !eval[bool](t, ctx, `!!navigator.connection`) {
		t.Fatal("no navigator.connection in this Chromium")
	}
	const limit = 2 * time.Second
	for i, tc := range []struct {
		name string
		hide bool   // hidden during the outage, visible again when the network returns
		back string // JavaScript that says the network returned ("": the page becomes visible)
	}{
		{name: "online", back: `dispatchEvent(new Event('online'))`},
		{name: "network change", back: `navigator.connection.dispatchEvent(new Event('change'))`},
		{name: "visible", hide: true},
		// Events come in bursts: one attempt for all of them.
		{name: "burst", back: `dispatchEvent(new Event('online')), navigator.connection.dispatchEvent(new Event('change')), dispatchEvent(new Event('online'))`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Into the dead zone: the open socket freezes, and the attempt
			// the network change starts hangs.
			_, heldBefore := p.Accepted()
			p.SetDeadZone(true)
			p.Blackhole()
			eval[bool](t, ctx, `navigator.connection.dispatchEvent(new Event('change')), true`)
			waitFor(t, ctx, "an attempt in the dead zone", `ccrelay.conn.ws?.readyState === WebSocket.CONNECTING && document.body.dataset.conn !== 'open'`, 10*time.Second)
			for deadline := time.Now().Add(10 * time.Second); ; {
				if _, held := p.Accepted(); held > heldBefore {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no connection held by the dead zone")
				}
				time.Sleep(25 * time.Millisecond)
			}
			if tc.hide {
				setHidden(t, ctx, true)
			}
			// The outage lasts a while: the attempt is well under way.
			time.Sleep(2 * time.Second)
			text := fmt.Sprintf("stored in dead zone %d", i)
			cli.envelopes(id, turn(fmt.Sprintf("nb%d", i), "during dead zone", text)...)

			// The network returns; what was sent into the dead zone is lost.
			p.LoseHeld()
			p.SetDeadZone(false)
			tries := eval[int](t, ctx, `ccrelay.conn.attempts`)
			returned := time.Now()
			if tc.hide {
				setHidden(t, ctx, false)
			} else {
				eval[bool](t, ctx, tc.back+`, true`)
			}
			waitFor(t, ctx, "the page connected and current", shows(text)+` && document.body.dataset.conn === 'open'`, 15*time.Second)
			back := time.Since(returned)
			t.Logf("%s: connected and current %v after the network returned (%d connect timeouts so far)", tc.name, back.Round(time.Millisecond), eval[int](t, ctx, `ccrelay.conn.timeouts`))
			if n := eval[int](t, ctx, `ccrelay.conn.attempts`) - tries; n != 1 {
				t.Errorf("%s: %d attempts when the network returned, want 1", tc.name, n)
			}
			if back > limit {
				t.Errorf("%s: back %v after the network returned, more than %v", tc.name, back.Round(time.Millisecond), limit)
			}
		})
	}
	rowsOnce(t, ctx, 4)
}
