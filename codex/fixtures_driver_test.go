package codex_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/codextest"
)

// rpcDriver drives `codex app-server` over stdio for the fixture tests: a
// bare JSON-RPC client that answers the server's requests with a fixed
// policy and logs every message both ways.
type rpcDriver struct {
	t      *testing.T
	cmd    *exec.Cmd
	cancel context.CancelFunc
	in     io.WriteCloser
	msgs   chan rpcMsg
	readWG sync.WaitGroup
	nextID int
	// answer is the result sent for a server request (by method).
	answer func(method string, params json.RawMessage) any
	// log is every message, in order: "<" from the server, ">" to it.
	log []loggedMsg
}

type rpcMsg struct {
	ID     *json.RawMessage `json:"id,omitempty"`
	Method string           `json:"method,omitempty"`
	Params json.RawMessage  `json:"params,omitempty"`
	Result json.RawMessage  `json:"result,omitempty"`
	Error  json.RawMessage  `json:"error,omitempty"`
}

type loggedMsg struct {
	Dir string          `json:"dir"`
	Msg json.RawMessage `json:"msg"`
}

// startAppServer starts `codex app-server` in e and completes the
// handshake.
func startAppServer(t *testing.T, e *codextest.Env, answer func(string, json.RawMessage) any) *rpcDriver {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t0 := time.Now()
	cmd := e.Command(ctx, "app-server")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("codex app-server: %v", err)
	}
	d := &rpcDriver{t: t, cmd: cmd, cancel: cancel, in: in, msgs: make(chan rpcMsg, 1024), answer: answer}
	d.readWG.Add(1)
	go func() {
		defer d.readWG.Done()
		defer close(d.msgs)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var m rpcMsg
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			d.msgs <- m
		}
	}()
	t.Cleanup(d.close)
	d.call("initialize", map[string]any{"clientInfo": map[string]any{"name": "ccrelay-fixtures", "version": "0"},
		"capabilities": map[string]any{"experimentalApi": true}})
	d.send(map[string]any{"method": "initialized"})
	t.Logf("codex app-server answered initialize in %v", time.Since(t0).Round(time.Millisecond))
	return d
}

// close ends the app server: stdin closed, then killed if it lingers.
func (d *rpcDriver) close() {
	d.in.Close()
	done := make(chan struct{})
	go func() {
		for range d.msgs {
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		d.cancel()
		<-done
	}
	d.readWG.Wait()
	_ = d.cmd.Wait()
	d.cancel()
}

func (d *rpcDriver) send(m map[string]any) {
	b, err := json.Marshal(m)
	if err != nil {
		d.t.Fatal(err)
	}
	d.log = append(d.log, loggedMsg{">", b})
	if _, err := d.in.Write(append(b, '\n')); err != nil {
		d.t.Fatalf("writing to the app server: %v", err)
	}
}

// next reads the next message, answering server requests on the way.
func (d *rpcDriver) next(deadline time.Time) rpcMsg {
	d.t.Helper()
	for {
		select {
		case m, ok := <-d.msgs:
			if !ok {
				d.t.Fatal("the app server ended")
			}
			raw, _ := json.Marshal(m)
			d.log = append(d.log, loggedMsg{"<", raw})
			if m.ID != nil && m.Method != "" {
				var res any = map[string]any{"decision": "decline"}
				if d.answer != nil {
					res = d.answer(m.Method, m.Params)
				}
				d.send(map[string]any{"id": m.ID, "result": res})
			}
			return m
		case <-time.After(time.Until(deadline)):
			d.t.Fatal("timed out waiting for the app server")
		}
	}
}

// call sends a request and waits for its result.
func (d *rpcDriver) call(method string, params any) json.RawMessage {
	d.t.Helper()
	d.nextID++
	id := d.nextID
	d.send(map[string]any{"id": id, "method": method, "params": params})
	deadline := time.Now().Add(time.Minute)
	for {
		m := d.next(deadline)
		if m.ID == nil || m.Method != "" {
			continue
		}
		var got int
		if json.Unmarshal(*m.ID, &got) != nil || got != id {
			continue
		}
		if len(m.Error) > 0 {
			d.t.Fatalf("%s: %s", method, m.Error)
		}
		return m.Result
	}
}

// waitFor reads until a notification of method arrives and returns its
// params.
func (d *rpcDriver) waitFor(method string) json.RawMessage {
	d.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		m := d.next(deadline)
		if m.ID == nil && m.Method == method {
			return m.Params
		}
	}
}

// startThread starts a thread in the project with the on-request approval
// policy and the read-only sandbox, and returns its id.
func (d *rpcDriver) startThread(project string) string {
	d.t.Helper()
	var r struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	res := d.call("thread/start", map[string]any{"cwd": project, "approvalPolicy": "on-request", "sandbox": "read-only"})
	if err := json.Unmarshal(res, &r); err != nil || r.Thread.ID == "" {
		d.t.Fatalf("thread/start: %v: %s", err, res)
	}
	return r.Thread.ID
}

// startTurn starts a turn with prompt (and the extra turn/start params)
// and returns its id.
func (d *rpcDriver) startTurn(thread, prompt string, extra map[string]any) string {
	d.t.Helper()
	var r struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	params := map[string]any{"threadId": thread, "input": []any{map[string]any{"type": "text", "text": prompt}}}
	for k, v := range extra {
		params[k] = v
	}
	res := d.call("turn/start", params)
	if err := json.Unmarshal(res, &r); err != nil || r.Turn.ID == "" {
		d.t.Fatalf("turn/start: %v: %s", err, res)
	}
	return r.Turn.ID
}

// serverRequests lists the methods of the requests the server sent.
func (d *rpcDriver) serverRequests() []string {
	var out []string
	for _, l := range d.log {
		var m rpcMsg
		if l.Dir == "<" && json.Unmarshal(l.Msg, &m) == nil && m.ID != nil && m.Method != "" {
			out = append(out, m.Method)
		}
	}
	return out
}

// decide answers the file change and command approval requests with
// decision, a request for user input with the first option of each
// question, and declines anything else (the fixture tests check which
// requests came).
func decide(decision string) func(string, json.RawMessage) any {
	return func(method string, params json.RawMessage) any {
		switch method {
		case "item/fileChange/requestApproval", "item/commandExecution/requestApproval":
			return map[string]any{"decision": decision}
		case "item/tool/requestUserInput":
			var p struct {
				Questions []struct {
					ID      string `json:"id"`
					Options []struct {
						Label string `json:"label"`
					} `json:"options"`
				} `json:"questions"`
			}
			_ = json.Unmarshal(params, &p)
			answers := map[string]any{}
			for _, q := range p.Questions {
				if len(q.Options) > 0 {
					answers[q.ID] = map[string]any{"answers": []string{q.Options[0].Label}}
				}
			}
			return map[string]any{"answers": answers}
		}
		return map[string]any{"decision": "decline"}
	}
}
