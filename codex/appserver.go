package codex

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// The app-server protocol (`codex app-server`, stdio): JSON-RPC 2.0, one
// message a line. The server's messages have no "jsonrpc" field, and it
// takes the client's without one. Three kinds come from the server:
// responses to the client's requests (id, result or error), notifications
// (method, params) and requests of its own (id, method, params), which
// the client must answer: Codex waits for the answer, and a turn whose
// approval is never answered never ends.

// MaxMessage bounds one message from app-server (a line). A longer line is
// read to its end and not kept; a request among such lines is still
// answered, by the id read from the line's start (MaxMessageHead).
const MaxMessage = 32 << 20

// MaxMessageHead is how much of an over-long line is kept to read its id
// and method (app-server writes both before the params).
const MaxMessageHead = 4 << 10

// RPCError is a JSON-RPC error.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("codex app-server error %d: %s", e.Code, e.Message)
}

// JSON-RPC error codes ccrelay answers with.
const (
	CodeMethodNotFound = -32601
	CodeInternal       = -32603
	// CodeRefused is the code of a request ccrelay declines: it cannot
	// do what is asked (no ChatGPT login to refresh, no attestation).
	CodeRefused = -32000
)

// message is one line of the protocol, in either direction.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *RPCError       `json:"error,omitempty"`
}

// Notification is a notification from app-server.
type Notification struct {
	Method string
	Params json.RawMessage
}

// Request is a request from app-server. It must be answered exactly once,
// with Reply or Fail: Codex waits for the answer.
type Request struct {
	// ID is the request's id as app-server wrote it (a number or a
	// string).
	ID     json.RawMessage
	Method string
	Params json.RawMessage
	// Oversize: the line was over MaxMessage; Params is nil and only the
	// id and method are known.
	Oversize bool

	c    *Client
	once sync.Once
	done bool
	mu   sync.Mutex
}

// Key is the request's id as a string fit for a map or for the app
// (the id's JSON text: 7, or "abc" with its quotes).
func (r *Request) Key() string { return string(r.ID) }

// Reply answers the request with result (marshalled to JSON).
func (r *Request) Reply(result any) error {
	b, err := json.Marshal(result)
	if err != nil {
		return fmt.Errorf("answer %s: %w", r.Method, err)
	}
	return r.answer(message{ID: r.ID, Result: b})
}

// Fail answers the request with an error.
func (r *Request) Fail(code int, text string) error {
	return r.answer(message{ID: r.ID, Error: &RPCError{Code: code, Message: text}})
}

// Answered reports whether the request was answered.
func (r *Request) Answered() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

// ErrAnswered is returned for a second answer to a request.
var ErrAnswered = errors.New("the request was answered already")

func (r *Request) answer(m message) error {
	err := ErrAnswered
	r.once.Do(func() {
		r.mu.Lock()
		r.done = true
		r.mu.Unlock()
		err = r.c.send(m)
	})
	return err
}

// Handler receives what app-server sends besides responses. Calls come
// from the client's reader, one at a time, in the order of the lines;
// they must not block (a request is answered later, from any goroutine).
type Handler interface {
	Notify(n Notification)
	// Request is handed each request of app-server's; it must be
	// answered, now or later (Request.Reply, Request.Fail).
	Request(r *Request)
	// Dropped is told of a line that was not read: over MaxMessage, or
	// not a JSON-RPC message (size is its length).
	Dropped(method string, size int64, err error)
}

// Client is a JSON-RPC client of one `codex app-server` over a pair of
// streams (the child's stdout and stdin). Run reads; Call and Notify
// write.
type Client struct {
	r io.Reader
	h Handler

	wmu sync.Mutex
	w   io.Writer

	mu      sync.Mutex
	next    int64
	calls   map[int64]chan message
	ended   chan struct{}
	endErr  error
	running bool
}

// NewClient returns a client reading app-server's messages from r and
// writing its own to w; nothing is read until Run.
func NewClient(r io.Reader, w io.Writer, h Handler) *Client {
	return &Client{r: r, w: w, h: h, calls: map[int64]chan message{}, ended: make(chan struct{})}
}

// ErrEnded is the error of a call app-server did not answer before its
// output ended.
var ErrEnded = errors.New("codex app-server ended")

// Run reads app-server's messages until its output ends (nil) or cannot be
// read; the calls waiting fail then with ErrEnded. Run once.
func (c *Client) Run() error {
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return errors.New("codex: client already runs")
	}
	c.running = true
	c.mu.Unlock()
	err := c.read()
	c.mu.Lock()
	c.endErr = ErrEnded
	if err != nil {
		c.endErr = fmt.Errorf("%w: %w", ErrEnded, err)
	}
	close(c.ended)
	c.mu.Unlock()
	return err
}

// Ended is closed once Run returned.
func (c *Client) Ended() <-chan struct{} { return c.ended }

func (c *Client) read() error {
	br := bufio.NewReaderSize(c.r, 64<<10)
	for {
		line, size, tooLong, err := readLine(br, MaxMessage, MaxMessageHead)
		if size > 0 {
			c.dispatch(line, size, tooLong)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine reads one line: its bytes (without the line ending) when it is
// at most max long, else its first head bytes with tooLong set; size is
// what was consumed.
func readLine(br *bufio.Reader, max, head int) (line []byte, size int64, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, rerr := br.ReadSlice('\n')
		size += int64(len(chunk))
		if !tooLong && len(buf)+len(chunk) > max+1 {
			tooLong = true
			if len(buf) < head {
				buf = append(buf, chunk[:min(len(chunk), head-len(buf))]...)
			}
		} else if !tooLong {
			buf = append(buf, chunk...)
		}
		switch {
		case rerr == nil:
		case errors.Is(rerr, bufio.ErrBufferFull):
			continue
		default:
			err = rerr
		}
		return bytes.TrimRight(buf, "\r\n"), size, tooLong, err
	}
}

func (c *Client) dispatch(line []byte, size int64, tooLong bool) {
	if len(bytes.TrimSpace(line)) == 0 && !tooLong {
		return
	}
	if tooLong {
		id, method := readHead(line)
		if method != "" && id != nil {
			// A request: it is answered all the same (declined).
			c.h.Request(&Request{ID: id, Method: method, Oversize: true, c: c})
			return
		}
		if id != nil && method == "" {
			// A response too long to read: the call fails.
			if n, err := strconv.ParseInt(string(id), 10, 64); err == nil {
				c.finish(n, message{ID: id, Error: &RPCError{Code: CodeInternal, Message: fmt.Sprintf("the answer was over %d bytes", MaxMessage)}})
			}
		}
		c.h.Dropped(method, size, fmt.Errorf("over %d bytes", MaxMessage))
		return
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		// A request whose params are not JSON still has an id to answer.
		if id, method := readHead(line); id != nil && method != "" {
			c.h.Request(&Request{ID: id, Method: method, Oversize: true, c: c})
			return
		}
		c.h.Dropped("", size, fmt.Errorf("not JSON: %w", err))
		return
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	switch {
	case m.Method != "" && hasID:
		c.h.Request(&Request{ID: m.ID, Method: m.Method, Params: m.Params, c: c})
	case m.Method != "":
		c.h.Notify(Notification{Method: m.Method, Params: m.Params})
	case hasID:
		n, err := strconv.ParseInt(string(m.ID), 10, 64)
		if err != nil {
			c.h.Dropped("", size, fmt.Errorf("a response to no request of ccrelay's (id %.40s)", m.ID))
			return
		}
		if !c.finish(n, m) {
			c.h.Dropped("", size, fmt.Errorf("a response to no request waiting (id %d)", n))
		}
	default:
		c.h.Dropped("", size, errors.New("neither a request, a notification nor a response"))
	}
}

// finish hands a response to the call waiting for it.
func (c *Client) finish(id int64, m message) bool {
	c.mu.Lock()
	ch, ok := c.calls[id]
	delete(c.calls, id)
	c.mu.Unlock()
	if ok {
		ch <- m
	}
	return ok
}

// readHead reads the id and method of a message from its first bytes (a
// line cut short, or one that is not valid JSON as a whole): the
// top-level members before the first one that cannot be read.
func readHead(b []byte) (id json.RawMessage, method string) {
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, ""
	}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			break
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			break
		}
		switch key {
		case "id":
			var s string
			var n json.Number
			if json.Unmarshal(v, &s) == nil || json.Unmarshal(v, &n) == nil {
				id = bytes.Clone(v)
			}
		case "method":
			_ = json.Unmarshal(v, &method)
		}
	}
	return id, method
}

// send writes one message as a line.
func (c *Client) send(m message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("codex: encode %s: %w", m.Method, err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("codex: write to app-server: %w", err)
	}
	return nil
}

// Notify sends a notification.
func (c *Client) Notify(method string, params any) error {
	m := message{Method: method}
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("codex: encode %s: %w", method, err)
		}
		m.Params = b
	}
	return c.send(m)
}

// Call sends a request and waits for its answer, which is decoded into
// result (if not nil). An error answer is an *RPCError; a call app-server
// ended without answering fails with ErrEnded.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	wait, err := c.Start(method, params)
	if err != nil {
		return err
	}
	return wait(ctx, result)
}

// Start sends a request and returns the wait for its answer: requests
// started one after another reach app-server in that order.
func (c *Client) Start(method string, params any) (wait func(ctx context.Context, result any) error, err error) {
	m := message{Method: method}
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return nil, fmt.Errorf("codex: encode %s: %w", method, err)
		}
		m.Params = b
	}
	ch := make(chan message, 1)
	c.mu.Lock()
	select {
	case <-c.ended:
		err := c.endErr
		c.mu.Unlock()
		return nil, fmt.Errorf("codex %s: %w", method, err)
	default:
	}
	c.next++
	id := c.next
	c.calls[id] = ch
	c.mu.Unlock()
	m.ID = json.RawMessage(strconv.FormatInt(id, 10))
	if err := c.send(m); err != nil {
		c.mu.Lock()
		delete(c.calls, id)
		c.mu.Unlock()
		return nil, err
	}
	decode := func(resp message, result any) error {
		if resp.Error != nil {
			return fmt.Errorf("codex %s: %w", method, resp.Error)
		}
		if result != nil && len(resp.Result) > 0 {
			if err := json.Unmarshal(resp.Result, result); err != nil {
				return fmt.Errorf("codex %s: read the answer: %w", method, err)
			}
		}
		return nil
	}
	forget := func() {
		c.mu.Lock()
		delete(c.calls, id)
		c.mu.Unlock()
	}
	return func(ctx context.Context, result any) error {
		select {
		case resp := <-ch:
			return decode(resp, result)
		case <-c.ended:
			// The answer may have come just before the end.
			select {
			case resp := <-ch:
				return decode(resp, result)
			default:
			}
			forget()
			c.mu.Lock()
			err := c.endErr
			c.mu.Unlock()
			return fmt.Errorf("codex %s: %w", method, err)
		case <-ctx.Done():
			forget()
			return fmt.Errorf("codex %s: %w", method, ctx.Err())
		}
	}, nil
}
