package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx"

	"github.com/ccrelay/ccrelay/internal/pgtest"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
)

// balancer spreads TCP connections over relay nodes, round robin, passing
// over a node that does not answer (a load balancer's health check).
type balancer struct {
	ln       net.Listener
	backends []string
	next     atomic.Uint64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

func startBalancer(t *testing.T, backends []string) *balancer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{ln: ln, backends: backends, conns: map[net.Conn]struct{}{}}
	b.wg.Go(b.serve)
	t.Cleanup(func() {
		ln.Close()
		b.mu.Lock()
		for c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *balancer) url() string { return "http://" + b.ln.Addr().String() }

func (b *balancer) track(c net.Conn, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if on {
		b.conns[c] = struct{}{}
	} else {
		delete(b.conns, c)
	}
}

func (b *balancer) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.wg.Go(func() {
			defer c.Close()
			b.track(c, true)
			defer b.track(c, false)
			start := b.next.Add(1)
			for i := range len(b.backends) {
				d, err := net.DialTimeout("tcp", b.backends[(int(start)+i)%len(b.backends)], time.Second)
				if err != nil {
					continue
				}
				b.track(d, true)
				done := make(chan struct{}, 2)
				go func() { io.Copy(d, c); d.Close(); done <- struct{}{} }()
				go func() { io.Copy(c, d); c.Close(); done <- struct{}{} }()
				<-done
				<-done
				b.track(d, false)
				return
			}
		})
	}
}

// relayNode is one `ccrelay serve --store postgres://…` of a test.
type relayNode struct {
	t          *testing.T
	data, addr string
	store      string
	mu         sync.Mutex
	cmd        *exec.Cmd
	token      string
}

func (n *relayNode) start() {
	n.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		cmd := exec.Command(binary, "serve", "--data", n.data, "--listen", n.addr, "--store", n.store)
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			n.t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, tok, ok := strings.Cut(sc.Text(), "#token="); ok {
				n.mu.Lock()
				n.cmd, n.token = cmd, tok
				n.mu.Unlock()
				go io.Copy(io.Discard, out)
				return
			}
		}
		cmd.Wait() // the address was not free yet
		if time.Now().After(deadline) {
			n.t.Fatalf("relay node %s did not start", n.addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (n *relayNode) kill() {
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	cmd.Process.Kill()
	cmd.Wait()
}

func (n *relayNode) stop() {
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
}

// pairCredential makes a machine's or a device's credential through the
// node at base, with its bootstrap token.
func pairCredential(t *testing.T, base, token, role string) string {
	t.Helper()
	_, cred := testutil.PairCredential(t, base, token, role, role, nil)
	return cred
}

// pacedSessionID is pacedSession for a session id of its own.
func pacedSessionID(t *testing.T, id string, pairs int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), id+".jsonl")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for i := range pairs {
		ts := func(k int) string {
			return base.Add(time.Duration(2*i+k) * 4 * time.Millisecond).Format(time.RFC3339Nano)
		}
		fmt.Fprintf(f, `{"type":"user","uuid":"u%d","timestamp":%q,"message":{"role":"user","content":"question %d"}}`+"\n", i, ts(0), i)
		fmt.Fprintf(f, `{"type":"assistant","uuid":"a%d","timestamp":%q,"message":{"id":"m%d","content":[{"type":"text","text":"answer %d"}]}}`+"\n", i, ts(1), i, i)
	}
	f.Close()
	return p
}

// follower is an app that follows a session through the balancer from
// the start to want envelopes, reconnecting (from its last sequence
// number) whenever its node dies; it fails on a gap or a repeat.
func follower(ctx context.Context, lb, cred, session string, want int, got *[]string) error {
	last := int64(0)
	for int(last) < want {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %d of %d envelopes seen", session, last, want)
		}
		c, _, err := websocket.Dial(ctx, strings.Replace(lb, "http", "ws", 1)+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + cred}}})
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		c.SetReadLimit(64 << 20)
		b, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameSubscribe, Session: session, After: last})
		if c.Write(ctx, websocket.MessageText, b) != nil {
			c.CloseNow()
			continue
		}
		for int(last) < want {
			_, msg, err := c.Read(ctx)
			if err != nil {
				break
			}
			var f protocol.Frame
			json.Unmarshal(msg, &f)
			if f.Type == protocol.FrameError && f.Code != "not-found" {
				break
			}
			for _, it := range f.Items {
				if it.Seq != last+1 {
					c.CloseNow()
					return fmt.Errorf("%s: envelope %d after %d (a gap or a repeat)", session, it.Seq, last)
				}
				last = it.Seq
				*got = append(*got, string(it.Envelope))
			}
		}
		c.CloseNow()
	}
	return nil
}

// Three relay nodes on one PostgreSQL, behind a balancer; CLIs (replay
// --to) and apps reach them through it. While the CLIs send, a node is
// SIGKILLed every 0.2–0.5 s and started again, and now and then every
// database connection of the nodes is cut. Then: each session the relays
// stored equals `ccrelay replay --format jsonl` of its transcript, every
// app saw every envelope once and in order, and every prompt an app sent
// (again on each reconnect, same id) was carried out by the CLI once and
// reached done.
func TestRelayNodesChaos(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.NewDatabase(t)
	var nodes []*relayNode
	var addrs []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		n := &relayNode{t: t, data: t.TempDir(), addr: addr, store: url}
		n.start()
		nodes = append(nodes, n)
		addrs = append(addrs, addr)
	}
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	machine := pairCredential(t, "http://"+nodes[0].addr, nodes[0].token, "machine")
	device := pairCredential(t, "http://"+nodes[0].addr, nodes[0].token, "device")
	machineFile := filepath.Join(t.TempDir(), "machine")
	os.WriteFile(machineFile, []byte(machine), 0o600)
	lb := startBalancer(t, addrs)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The chaos: kills and restarts, and cut database connections.
	chaosCtx, stopChaos := context.WithCancel(ctx)
	var chaos sync.WaitGroup
	var kills, cuts atomic.Int64
	chaos.Go(func() {
		for chaosCtx.Err() == nil {
			time.Sleep(time.Duration(200+rand.IntN(300)) * time.Millisecond)
			n := nodes[rand.IntN(len(nodes))]
			n.kill()
			kills.Add(1)
			n.start()
			if kills.Load()%4 == 0 {
				cutConnections(url)
				cuts.Add(1)
			}
		}
	})

	// CLIs: three sessions replayed at their own pace.
	sessions := []string{"c4a05000-1111-4111-8111-000000000001", "c4a05000-1111-4111-8111-000000000002", "c4a05000-1111-4111-8111-000000000003"}
	want := map[string][]string{}
	var clis []*exec.Cmd
	for _, id := range sessions {
		p := pacedSessionID(t, id, 1000)
		want[id] = strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", p).stdout, "\n"), "\n")
		cli := exec.Command(binary, "replay", "-q", "--format", "jsonl", "--to", lb.url(), "--relay-token-file", machineFile, "--state", t.TempDir(), "--speed", "1", p)
		if err := cli.Start(); err != nil {
			t.Fatal(err)
		}
		clis = append(clis, cli)
	}
	// Apps: each session followed by an app from the start.
	var apps sync.WaitGroup
	seen := map[string]*[]string{}
	errs := make(chan error, len(sessions)+1)
	for _, id := range sessions {
		got := &[]string{}
		seen[id] = got
		apps.Go(func() {
			if err := follower(ctx, lb.url(), device, id, len(want[id]), got); err != nil {
				errs <- err
			}
		})
	}
	// Commands: an app sends prompts to a CLI of the test, both through
	// the balancer, each resent (same id) until it is done.
	const cmdSession = "c4a05000-1111-4111-8111-0000000000cc"
	carried := map[string]int{}
	var carriedMu sync.Mutex
	cliCtx, stopCLI := context.WithCancel(ctx)
	var cliDone sync.WaitGroup
	cliDone.Go(func() { commandCLI(cliCtx, lb.url(), machine, cmdSession, carried, &carriedMu) })
	const prompts = 100
	apps.Go(func() {
		if err := sendPrompts(ctx, lb.url(), device, cmdSession, prompts); err != nil {
			errs <- err
		}
	})

	for _, cli := range clis {
		if err := cli.Wait(); err != nil {
			t.Errorf("replay --to: %v", err)
		}
	}
	apps.Wait()
	stopChaos()
	chaos.Wait()
	stopCLI()
	cliDone.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	for _, id := range sessions {
		sameLines(t, *seen[id], want[id])
		var stored []string
		if err := follower(ctx, lb.url(), device, id, len(want[id]), &stored); err != nil {
			t.Fatal(err)
		}
		sameLines(t, stored, want[id])
	}
	carriedMu.Lock()
	defer carriedMu.Unlock()
	for i := range prompts {
		id := fmt.Sprintf("p%03d", i)
		if carried[id] != 1 {
			t.Errorf("prompt %s carried out %d times", id, carried[id])
		}
	}
	if kills.Load() < 10 || cuts.Load() < 2 {
		t.Errorf("only %d kills and %d cuts: the chaos was too short to say much", kills.Load(), cuts.Load())
	}
	t.Logf("%d node kills, %d cuts of the database connections; %d prompts, %d deliveries to the CLI", kills.Load(), cuts.Load(), prompts, carried["delivered"])
}

// cutConnections ends every connection the relays hold to the database.
func cutConnections(url string) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return
	}
	defer db.Close()
	db.ExecContext(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
}

// commandCLI is a CLI of the test: it announces session and carries out
// each command once (a ledger by id), answering done, until ctx ends,
// reconnecting whenever its node dies.
func commandCLI(ctx context.Context, lb, cred, session string, carried map[string]int, mu *sync.Mutex) {
	for ctx.Err() == nil {
		c, _, err := websocket.Dial(ctx, strings.Replace(lb, "http", "ws", 1)+"/ws/cli", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + cred}}})
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		write := func(f protocol.Frame) error {
			f.V = protocol.FrameVersion
			b, _ := json.Marshal(f)
			return c.Write(ctx, websocket.MessageText, b)
		}
		if write(protocol.Frame{Type: protocol.FrameAnnounce, Ref: "a", Session: session, Info: json.RawMessage(`{"status":"idle","mode":"remote"}`)}) != nil {
			c.CloseNow()
			continue
		}
		for {
			_, msg, err := c.Read(ctx)
			if err != nil {
				break
			}
			var f protocol.Frame
			json.Unmarshal(msg, &f)
			if f.Type != protocol.FrameCommand || f.Command == nil {
				continue
			}
			// Carried out once, whatever the deliveries (its ledger);
			// deliveries counted apart.
			mu.Lock()
			if carried[f.Command.ID] == 0 {
				carried[f.Command.ID]++
			}
			carried["delivered"]++
			mu.Unlock()
			if write(protocol.Frame{Type: protocol.FrameResult, Ref: "r", Session: session, Command: &protocol.Command{ID: f.Command.ID}, Status: protocol.StatusDone}) != nil {
				break
			}
		}
		c.CloseNow()
	}
}

// sendPrompts sends n prompts in order, each until the relay says done,
// resending it (same id) after every reconnection.
func sendPrompts(ctx context.Context, lb, cred, session string, n int) error {
	i := 0
	for i < n {
		if ctx.Err() != nil {
			return fmt.Errorf("prompts: %d of %d done", i, n)
		}
		c, _, err := websocket.Dial(ctx, strings.Replace(lb, "http", "ws", 1)+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + cred}}})
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		for i < n {
			id := fmt.Sprintf("p%03d", i)
			b, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameCommand, Session: session, Command: &protocol.Command{ID: id, Kind: protocol.CommandPrompt, Text: "prompt " + id}})
			if c.Write(ctx, websocket.MessageText, b) != nil {
				break
			}
			status := ""
			for status == "" {
				_, msg, err := c.Read(ctx)
				if err != nil {
					break
				}
				var f protocol.Frame
				json.Unmarshal(msg, &f)
				if f.Type == protocol.FrameError && f.Code == "not-found" {
					break // the CLI has not announced the session yet
				}
				if f.Type == protocol.FrameStatus && f.Command != nil && f.Command.ID == id && (f.Status == protocol.StatusDone || f.Status == protocol.StatusRejected) {
					status = f.Status
				}
			}
			if status == "" {
				time.Sleep(20 * time.Millisecond)
				break
			}
			if status == protocol.StatusRejected {
				return errors.New("prompt " + id + " rejected")
			}
			i++
			time.Sleep(40 * time.Millisecond) // spread over the chaos
		}
		c.CloseNow()
	}
	return nil
}

// serve --migrate-only brings a store to this version's schema and exits:
// SQLite in the data folder, or PostgreSQL; --store refuses what is not a
// postgres:// URL, and never prints a URL's password.
func TestServeMigrateOnly(t *testing.T) {
	data := t.TempDir()
	res := run(t, "serve", "--data", data, "--migrate-only")
	if res.code != 0 || !strings.Contains(res.stdout, "schema version") {
		t.Fatalf("SQLite: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if _, err := os.Stat(filepath.Join(data, "relay.db")); err != nil {
		t.Fatal(err)
	}
	pg := pgtest.Start(t)
	url := pg.NewDatabase(t)
	res = run(t, "serve", "--data", t.TempDir(), "--store", url, "--migrate-only")
	if res.code != 0 || !strings.Contains(res.stdout, "schema version") {
		t.Fatalf("PostgreSQL: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRow(`SELECT MAX(version) FROM schema_version`).Scan(&v); err != nil || v < 5 {
		t.Fatalf("schema version %d, %v", v, err)
	}
	res = run(t, "serve", "--data", t.TempDir(), "--store", "mysql://root:hunter2@db/x", "--migrate-only")
	if res.code == 0 || !strings.Contains(res.stderr, "postgres://") || strings.Contains(res.stderr, "hunter2") {
		t.Fatalf("another engine: exit %d\n%s", res.code, res.stderr)
	}
	res = run(t, "serve", "--data", t.TempDir(), "--store", "postgres://ccrelay:hunter2@127.0.0.1:1/x?connect_timeout=2", "--migrate-only")
	if res.code == 0 || strings.Contains(res.stderr, "hunter2") {
		t.Fatalf("an unreachable database: exit %d\n%s", res.code, res.stderr)
	}
}
