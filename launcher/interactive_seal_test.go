//go:build unix

package launcher

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/relay"
	"github.com/ccrelay/ccrelay/seal"
)

// The real Claude Code in local mode (interactive, in a terminal), its
// session sent through a sealing outbox to a relay: the relay's database
// holds none of the prompt or the answer, and the paired device opens
// every stored envelope to what the pipeline mapped.
func TestRealClaudeInteractiveSealed(t *testing.T) {
	const (
		prompt = "whisper the password of the lighthouse"
		answer = "The lighthouse password is periwinkle-77, whispered."
	)
	e := claudetest.New(t, fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text(answer)}})

	// A relay, and a device paired with it that the machine trusts.
	data := t.TempDir()
	st, err := relay.OpenStore(filepath.Join(data, "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	const token = "local-sealed-token"
	srv := httptest.NewServer(relay.NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), token).Handler())
	defer srv.Close()
	defer st.Close()
	phone, _ := seal.GenerateKeyPair()
	var red struct{ ID string }
	red.ID, _ = testutil.PairDevice(t, srv.URL, token, "phone", phone.Public().Bytes())
	machine, _ := ecdh.X25519().GenerateKey(rand.Reader)
	kr, err := apiclient.OpenKeyring(t.TempDir(), machine)
	if err != nil {
		t.Fatal(err)
	}
	kr.Trust(apiclient.TrustedDevice{ID: red.ID, Name: "phone", PublicKey: phone.Public().Bytes()})

	box, err := apiclient.OpenOutboxWith(t.TempDir(), apiclient.OutboxOptions{Sealer: kr})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	client := apiclient.NewClient(apiclient.Config{URL: srv.URL, Token: token, Keyring: kr, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, box)
	cctx, stop := context.WithCancel(context.Background())
	clientDone := make(chan error, 1)
	go func() { clientDone <- client.Run(cctx) }()
	defer func() { stop(); <-clientDone }()

	// What the pipeline maps, kept to compare; sealed into the outbox.
	mem := &MemOutbox{}
	pipe := NewPipeline("", teeOutbox{mem, box})
	sessions := runInteractive(t, e, pipe, prompt, func() bool { return hasAgentText(mem.Envelopes(), "periwinkle-77") },
		func() string { return strings.Join(describeAll(mem.Envelopes()), " ") })
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.Flush(fctx); err != nil {
		t.Fatal(err)
	}

	session := sessions[0]
	var disk []byte
	for _, name := range []string{"relay.db", "relay.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(data, name))
		disk = append(disk, b...)
	}
	for _, s := range []string{prompt, "periwinkle-77", e.Project} {
		if bytes.Contains(disk, []byte(s)) {
			t.Errorf("the relay's database holds %q", s)
		}
	}
	wrapped, _, err := st.SessionKeyFor(fctx, session, red.ID)
	if err != nil {
		t.Fatal(err)
	}
	key, err := seal.UnwrapKey(phone, machine.PublicKey(), session, wrapped)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := st.Read(fctx, session, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := mem.Envelopes()
	if len(rows) != len(want) {
		t.Fatalf("%d stored, %d mapped", len(rows), len(want))
	}
	for i, row := range rows {
		h, err := protocol.DecodeSealed(row.Body)
		if err != nil {
			t.Fatalf("row %d is not sealed: %s", i, row.Body)
		}
		plain, err := key.Open(seal.AD{Session: session, ID: h.ID, Direction: seal.FromMachine}, h.Sealed)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := want[i].AppendJSON(nil)
		plain, c, _ := protocol.SplitChain(plain)
		if c.N != int64(i+1) {
			t.Errorf("row %d is number %d of the sealed chain", i, c.N)
		}
		if !bytes.Equal(plain, w) {
			t.Errorf("row %d opens to %s, want %s", i, plain, w)
		}
	}
}

// teeOutbox appends to both outboxes.
type teeOutbox struct{ a, b Outbox }

func (o teeOutbox) Append(ctx context.Context, session string, envs []protocol.Envelope) error {
	if err := o.a.Append(ctx, session, envs); err != nil {
		return err
	}
	return o.b.Append(ctx, session, envs)
}
