package codex

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"
)

// declineAll declines every request as it comes and counts what it was
// given.
type declineAll struct {
	t        *testing.T
	requests int
}

func (h *declineAll) Notify(Notification) {}
func (h *declineAll) Request(r *Request) {
	h.requests++
	if err := Decline(r, "no", false); err != nil {
		h.t.Fatalf("decline %s: %v", r.Method, err)
	}
}
func (h *declineAll) Dropped(string, int64, error) {}

// Whatever app-server writes, the client does not panic, a call it does
// not answer ends with the output, and every request is answered once by
// a line of valid JSON that carries the request's id.
func FuzzClientRead(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"result":{}}`,
		`{"id":0,"method":"` + RequestCommandApproval + `","params":{"threadId":"t"}}`,
		`{"id":"a b","method":"` + RequestLegacyExec + `","params":{}}`,
		`{"id":{"x":1},"method":"m"}`, `{"id":null,"method":"n"}`, `{"id":[1],"method":"m","params":[}`,
		`{"method":"turn/started","params":{"turn":{"id":"x"}}}`,
		`{"id":1,"error":{"code":-1,"message":"x"}}`, `{"id":1.0,"result":1}`, `{"id":"1","result":1}`,
		`{"id":7,"method":"` + RequestUserInput + `","params":` + "\n", `{"ID":3,"Method":"` + RequestAuthRefresh + `"}`,
		"\xff\xfe", `[]`, `null`, "{\"id\":1,\"method\":\"\u2028\"}\r\n{\"id\":2,\"method\":\"x\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		h := &declineAll{t: t}
		c := NewClient(bytes.NewReader(in), &out, h)
		wait, err := c.Start("initialize", map[string]string{"x": "y"})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Run(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := wait(ctx, nil); ctx.Err() != nil {
			t.Fatalf("the call still waits after the output ended: %v", err)
		}
		lines := bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n"))
		if len(lines) != 1+h.requests {
			t.Fatalf("%d lines written for 1 call and %d requests", len(lines), h.requests)
		}
		for _, l := range lines[1:] {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(l, &m); err != nil {
				t.Fatalf("answer %q is not JSON: %v", l, err)
			}
			if len(m["id"]) == 0 || (m["result"] == nil) == (m["error"] == nil) {
				t.Fatalf("answer %q: want an id and one of result and error", l)
			}
		}
	})
}
