package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
)

// busyRelay stands in front of a relay at base and answers busy, as the
// relay does when an app connection has too many reads of history under
// way, to the first n subscribes of each (session, after, before), on any
// app connection; the others, and everything else, pass through.
type busyRelay struct {
	base string
	n    int

	mu       sync.Mutex
	answered map[string]int // busy answers by subscribe
	passed   int            // subscribes let through
}

func startBusyRelay(t *testing.T, relayBase string, n int) *busyRelay {
	t.Helper()
	target, err := url.Parse(relayBase)
	if err != nil {
		t.Fatal(err)
	}
	b := &busyRelay{n: n, answered: map[string]int{}}
	mux := http.NewServeMux()
	// No X-Forwarded-For (the relay would take the page for one from
	// another machine, through a proxy it does not trust), and the Host the
	// page asked for (its module scripts carry an Origin naming it).
	mux.Handle("/", &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host
	}})
	mux.HandleFunc("/ws/app", func(w http.ResponseWriter, r *http.Request) { b.serveApp(w, r, target) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	b.base = "http://" + ln.Addr().String()
	return b
}

func (b *busyRelay) serveApp(w http.ResponseWriter, r *http.Request, target *url.URL) {
	var protocols []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(h, ",") {
			protocols = append(protocols, strings.TrimSpace(p))
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	up, _, err := websocket.Dial(ctx, "ws://"+target.Host+r.URL.Path+"?"+r.URL.RawQuery, &websocket.DialOptions{Subprotocols: protocols})
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer up.CloseNow()
	app, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: protocols})
	if err != nil {
		return
	}
	defer app.CloseNow()
	up.SetReadLimit(-1)
	app.SetReadLimit(-1)
	var wmu sync.Mutex // the app's socket is written by both pumps
	toApp := func(typ websocket.MessageType, data []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return app.Write(ctx, typ, data)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { // the relay's frames to the app
		defer cancel()
		for {
			typ, data, err := up.Read(ctx)
			if err != nil || toApp(typ, data) != nil {
				return
			}
		}
	})
	defer cancel()
	for { // the app's frames to the relay, or answered busy here
		typ, data, err := app.Read(ctx)
		if err != nil {
			return
		}
		var f struct {
			Type    string `json:"type"`
			Ref     string `json:"ref,omitempty"`
			Session string `json:"session"`
			After   int64  `json:"after"`
			Before  int64  `json:"before,omitempty"`
		}
		if json.Unmarshal(data, &f) == nil && f.Type == "subscribe" {
			key := fmt.Sprintf("%s/%d/%d", f.Session, f.After, f.Before)
			b.mu.Lock()
			busy := b.answered[key] < b.n
			if busy {
				b.answered[key]++
			} else {
				b.passed++
			}
			b.mu.Unlock()
			if busy {
				e, _ := json.Marshal(map[string]any{"v": 1, "type": "error", "code": "busy", "ref": f.Ref, "session": f.Session, "after": f.After, "before": f.Before,
					"message": "4 reads of history are under way on this connection (at most 4): send the subscribe again once one has ended (its caught-up)"})
				if toApp(websocket.MessageText, e) != nil {
					return
				}
				continue
			}
		}
		if up.Write(ctx, typ, data) != nil {
			return
		}
	}
}

func (b *busyRelay) counts() (busy map[string]int, passed int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	busy = map[string]int{}
	for k, v := range b.answered {
		busy[k] = v
	}
	return busy, b.passed
}

// An app whose subscribes the relay answers busy (too many reads of
// history under way on its connection) sends them again, with a bounded
// backoff, and on a fresh connection after BUSY_TRIES answers in a row:
// the tail of a long session and its earlier part (fetched on a socket of
// its own) are each answered busy seven times, and the app still shows
// every envelope, each once, with no error said to the reader. Without
// the retries the app showed the relay's message in a toast and never the
// session.
func TestAppRetriesBusy(t *testing.T) {
	r := startAppRelay(t)
	id, envs := r.replay(t, corpus+"/public/spotter/test/fixtures/transcripts/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl")
	const busyTries = 6 // conn.js: BUSY_TRIES
	b := startBusyRelay(t, r.base, busyTries+1)
	ctx := newBrowser(t)
	must(t, ctx, phone(), chromedp.Navigate(b.base+"/#token="+r.token+"&timing=backoffMin:20,backoffMax:200"))
	waitJS(t, ctx, "the session listed", fmt.Sprintf(`!!document.querySelector('li[data-session=%q] a')`, id))
	click(t, ctx, fmt.Sprintf(`li[data-session=%q] a`, id))
	waitJS(t, ctx, "the session rendered", fmt.Sprintf(`document.body.dataset.rendered === %q`, id))
	showAll(t, ctx)
	waitJS(t, ctx, "the earlier part joined", fmt.Sprintf(`document.body.dataset.earlier === %q`, id))
	checkShows(t, readState(t, ctx), expected(envs))
	if n := eval[int](t, ctx, `document.querySelectorAll('.blocks [data-id]').length`); n == 0 {
		t.Fatal("no rows shown")
	}
	// Nothing scary: no toast, no note of skipped envelopes.
	if said := eval[string](t, ctx, `[...document.querySelectorAll('.toast, .skip-note')].filter((e) => !e.hidden).map((e) => e.textContent).join(' | ')`); said != "" {
		t.Errorf("the page says %q", said)
	}
	if toasts := eval[int](t, ctx, `document.querySelectorAll('.toast').length`); toasts != 0 {
		t.Errorf("a toast was shown")
	}
	busy, passed := b.counts()
	t.Logf("busy answers %v; subscribes let through %d; busy answers the app took %d", busy, passed, eval[int](t, ctx, `window.ccrelay.conn.busyAnswers`))
	var tail, earlier bool
	for k, n := range busy {
		if n != busyTries+1 {
			t.Errorf("subscribe %s answered busy %d times, want %d (the app gave up on it)", k, n, busyTries+1)
		}
		tail = tail || strings.HasSuffix(k, "/0")
		earlier = earlier || !strings.HasSuffix(k, "/0")
	}
	if !tail || !earlier {
		t.Errorf("busy answers %v: want both the tail's subscribe and the earlier part's", busy)
	}
}
