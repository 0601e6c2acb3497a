package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/relay"
)

// A paired phone lists a machine and a session it runs, both sealed, the
// session working; their ccrelay goes away and does not come back: the
// phone shows the session idle with the relay's reason (not what its
// sealed summary said last), and the machine gone, running nothing.
func TestAppSealedSessionsWhoseCLIIsGone(t *testing.T) {
	r := &appRelay{data: t.TempDir()}
	r.cmd, r.base, r.token = startServe(t, r.data, "--cli-gone-after", "1s")
	t.Cleanup(func() { r.cmd.Process.Signal(syscall.SIGTERM); r.cmd.Wait() })
	ctx := newBrowser(t)
	must(t, ctx, phone())
	state := pairBrowser(t, ctx, r)

	kr, err := openKeyring(state)
	if err != nil {
		t.Fatal(err)
	}
	box, err := apiclient.OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	cl := apiclient.NewClient(apiclient.Config{URL: r.base, Token: r.token, Keyring: kr, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, box)
	cctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.Run(cctx) }()
	defer func() { stop(); <-done }()
	machine, s1 := claude.NewSessionID(), claude.NewSessionID()
	cl.Announce(machine, json.RawMessage(fmt.Sprintf(`{"mode":"machine","status":"idle","machine":"orchard-box","title":"orchard-box",
		"daemon":{"os":"linux","arch":"amd64","folders":[],"running":[%q]}}`, s1)))
	cl.Announce(s1, json.RawMessage(fmt.Sprintf(`{"mode":"remote","status":"busy","cwd":"/w","machine":"orchard-box","startedBy":%q}`, machine)))
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the sealed machine running the working session", fmt.Sprintf(`(() => {
		const s = ccrelay.sessions.get(%q), m = ccrelay.sessions.get(%q);
		return !!s && !!m && s.info.status === 'busy' && !!m.info.daemon && m.info.daemon.running.has(%q) && !s.info.locked && !m.info.locked;
	})()`, s1, machine, s1))

	stop() // the machine's ccrelay goes away
	<-done
	done <- nil
	want, _ := json.Marshal(map[string]string{"working": relay.CLIGoneWorkingAs(""), "machine": relay.CLIGoneMachine}) // sealed: the agent is not known to the relay
	waitJS(t, ctx, "the session idle with the reason, the machine gone running nothing", fmt.Sprintf(`(() => {
		const want = %s, s = ccrelay.sessions.get(%q), m = ccrelay.sessions.get(%q);
		return s.info.status === 'idle' && s.info.error === want.working && s.info.cliGone > 0 &&
			m.info.error === want.machine && m.info.cliGone > 0 && m.info.daemon.running.size === 0;
	})()`, want, s1, machine))
}
