package codex

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a Handler that keeps what it is given.
type recorder struct {
	mu      sync.Mutex
	notes   []Notification
	reqs    []*Request
	dropped []string
	got     chan struct{}
	// answer, if set, answers each request as it comes.
	answer func(*Request)
}

func newRecorder() *recorder { return &recorder{got: make(chan struct{}, 100)} }

func (h *recorder) Notify(n Notification) {
	h.mu.Lock()
	h.notes = append(h.notes, n)
	h.mu.Unlock()
	h.got <- struct{}{}
}

func (h *recorder) Request(r *Request) {
	h.mu.Lock()
	h.reqs = append(h.reqs, r)
	h.mu.Unlock()
	if h.answer != nil {
		h.answer(r)
	}
	h.got <- struct{}{}
}

func (h *recorder) Dropped(method string, size int64, err error) {
	h.mu.Lock()
	h.dropped = append(h.dropped, method+": "+err.Error())
	h.mu.Unlock()
	h.got <- struct{}{}
}

func (h *recorder) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-h.got:
		case <-time.After(10 * time.Second):
			t.Fatal("nothing came from the client")
		}
	}
}

// peer is the server side of a client under test: it reads the client's
// lines and writes its own.
type peer struct {
	in  chan []byte // the lines the client wrote
	out *io.PipeWriter
}

func newPair(t *testing.T, h Handler) (*Client, *peer, chan error) {
	t.Helper()
	cr, pw := io.Pipe() // peer -> client
	pr, cw := io.Pipe() // client -> peer
	c := NewClient(cr, cw, h)
	done := make(chan error, 1)
	go func() { done <- c.Run() }()
	in := make(chan []byte, 100)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		br := bufio.NewReader(pr)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			in <- line
		}
	}()
	t.Cleanup(func() {
		pw.Close()
		pr.Close()
		<-c.Ended()
		<-readDone
	})
	return c, &peer{in: in, out: pw}, done
}

func (p *peer) read(t *testing.T) map[string]any {
	t.Helper()
	var line []byte
	select {
	case line = <-p.in:
	case <-time.After(10 * time.Second):
		t.Fatal("the client wrote nothing")
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("the client wrote %q: %v", line, err)
	}
	return m
}

func (p *peer) write(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.out, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func TestClientCallsMatchedByID(t *testing.T) {
	h := newRecorder()
	c, p, _ := newPair(t, h)
	ctx := context.Background()
	type res struct {
		v   map[string]string
		err error
	}
	results := make([]chan res, 2)
	for i, method := range []string{"a", "b"} {
		results[i] = make(chan res, 1)
		wait, err := c.Start(method, map[string]int{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			var v map[string]string
			err := wait(ctx, &v)
			results[i] <- res{v, err}
		}()
	}
	a, b := p.read(t), p.read(t)
	if a["method"] != "a" || b["method"] != "b" || a["id"] == b["id"] {
		t.Fatalf("requests %v %v", a, b)
	}
	if _, ok := a["jsonrpc"]; ok {
		t.Errorf("the client wrote a jsonrpc field app-server does not write: %v", a)
	}
	// Answered in the other order; b with an error.
	p.write(t, `{"id":`+jsonText(b["id"])+`,"error":{"code":-32600,"message":"no"}}`)
	p.write(t, `{"id":`+jsonText(a["id"])+`,"result":{"x":"y"}}`)
	ra, rb := <-results[0], <-results[1]
	if ra.err != nil || ra.v["x"] != "y" {
		t.Errorf("a: %v %v", ra.v, ra.err)
	}
	var rpc *RPCError
	if !errors.As(rb.err, &rpc) || rpc.Code != -32600 || rpc.Message != "no" {
		t.Errorf("b: %v", rb.err)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestClientNotificationsAndRequests(t *testing.T) {
	h := newRecorder()
	_, p, _ := newPair(t, h)
	p.write(t, `{"method":"turn/started","params":{"threadId":"t","turn":{"id":"u","status":"inProgress"}}}`)
	p.write(t, `{"method":"item/fileChange/requestApproval","id":0,"params":{"threadId":"t","turnId":"u","itemId":"call_1"}}`)
	p.write(t, `{"method":"x/y","id":"s-1","params":{}}`)
	h.wait(t, 3)
	if len(h.notes) != 1 || h.notes[0].Method != NotifyTurnStarted {
		t.Fatalf("notifications %+v", h.notes)
	}
	if len(h.reqs) != 2 || h.reqs[0].Method != RequestFileChangeApproval || string(h.reqs[0].ID) != "0" || string(h.reqs[1].ID) != `"s-1"` {
		t.Fatalf("requests %+v", h.reqs)
	}
	if err := h.reqs[0].Reply(DecisionResponse{Decision: DecisionAccept}); err != nil {
		t.Fatal(err)
	}
	if got := p.read(t); jsonText(got) != `{"id":0,"result":{"decision":"accept"}}` {
		t.Errorf("answer %s", jsonText(got))
	}
	if err := h.reqs[0].Reply(DecisionResponse{Decision: DecisionDecline}); !errors.Is(err, ErrAnswered) {
		t.Errorf("a second answer: %v", err)
	}
	if !h.reqs[0].Answered() || h.reqs[1].Answered() {
		t.Error("Answered")
	}
	// A string id is answered as a string.
	if err := Decline(h.reqs[1], "why", false); err != nil {
		t.Fatal(err)
	}
	got := p.read(t)
	if got["id"] != "s-1" || got["error"].(map[string]any)["code"].(float64) != CodeMethodNotFound {
		t.Errorf("decline of an unknown method: %s", jsonText(got))
	}
}

// An over-long request is still handed over, with its id and method, to
// be answered; an over-long response fails its call; neither stops the
// client.
func TestClientOversizeLines(t *testing.T) {
	h := newRecorder()
	c, p, _ := newPair(t, h)
	big := strings.Repeat("x", MaxMessage+10)
	p.write(t, `{"method":"item/commandExecution/requestApproval","id":7,"params":{"command":"`+big+`"}}`)
	h.wait(t, 1)
	if len(h.reqs) != 1 || !h.reqs[0].Oversize || string(h.reqs[0].ID) != "7" || h.reqs[0].Method != RequestCommandApproval {
		t.Fatalf("requests %+v", h.reqs)
	}
	if err := Decline(h.reqs[0], "too big", false); err != nil {
		t.Fatal(err)
	}
	if got := jsonText(p.read(t)); got != `{"id":7,"result":{"decision":"decline"}}` {
		t.Errorf("answer %s", got)
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Call(context.Background(), "thread/read", nil, nil) }()
	req := p.read(t)
	p.write(t, `{"id":`+jsonText(req["id"])+`,"result":{"v":"`+big+`"}}`)
	var rpc *RPCError
	if err := <-errc; !errors.As(err, &rpc) {
		t.Errorf("an over-long answer: %v", err)
	}
	h.wait(t, 1) // dropped, logged
	// Not JSON, and a request whose params are broken: the latter is
	// answerable.
	p.write(t, `not json`)
	p.write(t, `{"method":"item/tool/requestUserInput","id":8,"params":{"questions":[}`)
	h.wait(t, 2)
	if len(h.dropped) != 2 || len(h.reqs) != 2 || string(h.reqs[1].ID) != "8" || !h.reqs[1].Oversize {
		t.Fatalf("dropped %q, requests %+v", h.dropped, h.reqs)
	}
}

func TestClientEnded(t *testing.T) {
	h := newRecorder()
	c, p, done := newPair(t, h)
	errc := make(chan error, 1)
	go func() { errc <- c.Call(context.Background(), "turn/start", nil, nil) }()
	p.read(t)
	p.out.Close()
	if err := <-errc; !errors.Is(err, ErrEnded) {
		t.Errorf("a call app-server ended without answering: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := c.Call(context.Background(), "turn/start", nil, nil); !errors.Is(err, ErrEnded) {
		t.Errorf("a call after the end: %v", err)
	}
}

func TestReadHead(t *testing.T) {
	for _, tc := range []struct {
		in, id, method string
	}{
		{`{"method":"a/b","id":3,"params":{"x":`, "3", "a/b"},
		{`{"id":"q","method":"a/b","params":`, `"q"`, "a/b"},
		{`{"params":{"x":1},"id":4,"method":"m"`, "4", "m"},
		{`{"params":{"x":"cut`, "", ""},
		{`{"id":{"no":1},"method":"m"}`, "", "m"},
		{`[1,2]`, "", ""},
		{``, "", ""},
	} {
		id, method := readHead([]byte(tc.in))
		if string(id) != tc.id || method != tc.method {
			t.Errorf("readHead(%q) = %q %q, want %q %q", tc.in, id, method, tc.id, tc.method)
		}
	}
}

// Each server request has a refusal of its own kind, as the schema of
// TestedVersion has it.
func TestDecline(t *testing.T) {
	for _, tc := range []struct {
		method string
		cancel bool
		want   string
	}{
		{RequestCommandApproval, false, `{"id":1,"result":{"decision":"decline"}}`},
		{RequestCommandApproval, true, `{"id":1,"result":{"decision":"cancel"}}`},
		{RequestFileChangeApproval, false, `{"id":1,"result":{"decision":"decline"}}`},
		{RequestLegacyExec, false, `{"id":1,"result":{"decision":{"denied":{"rejection":"r"}}}}`},
		{RequestLegacyPatch, true, `{"id":1,"result":{"decision":"abort"}}`},
		{RequestPermissions, false, `{"id":1,"result":{"permissions":{},"scope":"turn"}}`},
		{RequestUserInput, false, `{"id":1,"result":{"answers":{}}}`},
		{RequestElicitation, false, `{"id":1,"result":{"action":"decline","content":null}}`},
		{RequestDynamicTool, false, `{"id":1,"result":{"contentItems":[{"text":"r","type":"inputText"}],"success":false}}`},
		{RequestAuthRefresh, false, `{"error":{"code":-32000,"message":"r"},"id":1}`},
		{RequestAttestation, false, `{"error":{"code":-32000,"message":"r"},"id":1}`},
		{"some/new", false, `{"error":{"code":-32601,"message":"ccrelay does not handle some/new: r"},"id":1}`},
	} {
		var sb strings.Builder
		c := NewClient(strings.NewReader(""), &sb, newRecorder())
		r := &Request{ID: json.RawMessage("1"), Method: tc.method, c: c}
		if err := Decline(r, "r", tc.cancel); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(sb.String()), &m); err != nil {
			t.Fatal(err)
		}
		if got := jsonText(m); got != tc.want {
			t.Errorf("%s cancel=%v: %s, want %s", tc.method, tc.cancel, got, tc.want)
		}
	}
}
