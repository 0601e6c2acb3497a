package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/internal/pgtest"
	"github.com/ccrelay/ccrelay/protocol"
)

// BenchmarkRelay: one CLI sends to one relay with 1, 10 and 100 subscribed
// apps on loopback. "flood" sends as fast as acks allow (envelopes/s
// stored); "paced" sends 1,000 envelopes/s. Latency is from the CLI's send
// to an app's receive, over every app.
func BenchmarkRelay(b *testing.B) {
	for _, mode := range []string{"flood", "paced"} {
		for _, apps := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("%s/apps=%d", mode, apps), func(b *testing.B) { benchRelay(b, apps, mode == "paced") })
		}
	}
}

func benchRelay(b *testing.B, apps int, paced bool) {
	st, err := OpenStore(filepath.Join(b.TempDir(), "relay.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	srv := httptestServer(b, NewServer(st, nil, testToken).Handler())
	benchRelayOn(b, srv, srv, apps, paced)
}

// BenchmarkRelayNodes: the same flood on one relay on SQLite, one on
// PostgreSQL, and three on one PostgreSQL with the CLI on the first node
// and the apps on the second (envelopes cross through the database).
// Compare the three with benchstat; docs/deploy.md has the figures.
func BenchmarkRelayNodes(b *testing.B) {
	pg := pgtest.Start(b)
	for _, setup := range []string{"sqlite/nodes=1", "postgres/nodes=1", "postgres/nodes=3"} {
		for _, apps := range []int{1, 10} {
			b.Run(fmt.Sprintf("%s/apps=%d", setup, apps), func(b *testing.B) {
				if setup == "sqlite/nodes=1" {
					benchRelay(b, apps, false)
					return
				}
				url := pg.NewDatabase(b)
				a := startNode(b, url)
				if setup == "postgres/nodes=1" {
					benchRelayOn(b, a.srv.URL, a.srv.URL, apps, false)
					return
				}
				n2, _ := startNode(b, url), startNode(b, url)
				benchRelayOn(b, a.srv.URL, n2.srv.URL, apps, false)
			})
		}
	}
}

// benchRelayOn runs the benchmark with the CLI on the relay at cliBase and
// the apps on the one at appBase.
func benchRelayOn(b *testing.B, cliBase, appBase string, apps int, paced bool) {
	total := max(b.N, 100)
	b.ResetTimer()
	rate, lat := flood(b, cliBase, appBase, apps, total, paced, nil)
	b.StopTimer()
	b.ReportMetric(rate, "envelopes/s")
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// flood sends total envelopes from a CLI on cliBase, in batches of 100
// (paced: 10 every 10 ms), to apps following on appBase; it returns the
// envelopes stored per second and every app's latencies, sorted. With
// items, those are the envelopes (total is their number) and no latency
// is measured.
func flood(b testing.TB, cliBase, appBase string, apps, total int, paced bool, items []Item) (float64, []time.Duration) {
	rate, lat, _ := floodAcks(b, cliBase, appBase, apps, total, paced, items)
	return rate, lat
}

// floodAcks is flood that also returns each batch's time from its send to
// its ack (the append as the CLI sees it), sorted.
func floodAcks(b testing.TB, cliBase, appBase string, apps, total int, paced bool, items []Item) (float64, []time.Duration, []time.Duration) {
	if items != nil {
		total = len(items)
	}
	ctx := context.Background()
	hdr := &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}}
	url := "ws" + cliBase[len("http"):]
	appURL := "ws" + appBase[len("http"):]
	session := s1 // a UUID, as the relay takes only
	// The session exists before the apps subscribe (it belongs to the token
	// of the CLI that announced it).
	{
		c, _, err := websocket.Dial(ctx, url+"/ws/cli", hdr)
		if err != nil {
			b.Fatal(err)
		}
		f, _ := json.Marshal(protocol.Frame{V: 1, Type: protocol.FrameAnnounce, Session: session, Info: json.RawMessage(`{}`)})
		c.Write(ctx, websocket.MessageText, f)
		if _, _, err := c.Read(ctx); err != nil {
			b.Fatal(err)
		}
		c.Close(websocket.StatusNormalClosure, "")
	}
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	ready := make(chan struct{}, apps)
	for range apps {
		c, _, err := websocket.Dial(ctx, appURL+"/ws/app", hdr)
		if err != nil {
			b.Fatal(err)
		}
		c.SetReadLimit(MaxFrameBytes)
		defer c.CloseNow()
		f, _ := json.Marshal(protocol.Frame{V: 1, Type: protocol.FrameSubscribe, Session: session})
		c.Write(ctx, websocket.MessageText, f)
		wg.Go(func() {
			var mine []time.Duration
			got := 0
			for got < total {
				_, data, err := c.Read(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				// Only what the measure needs, found in the bytes: an
				// app's own decoding is not the relay's work, and here it
				// would share the relay's two cores.
				if bytes.Contains(data, []byte(`"type":"`+protocol.FrameCaughtUp+`"`)) {
					ready <- struct{}{}
					continue
				}
				if !bytes.Contains(data, []byte(`"type":"`+protocol.FrameBatch+`"`)) {
					continue
				}
				if items != nil {
					got += bytes.Count(data, []byte(`{"seq":`))
					continue
				}
				for rest := data; ; {
					i := bytes.Index(rest, []byte(`"text":"`))
					if i < 0 {
						break
					}
					rest = rest[i+len(`"text":"`):]
					j := bytes.IndexByte(rest, '"')
					sent, _ := strconv.ParseInt(string(rest[:j]), 10, 64)
					mine = append(mine, time.Since(time.Unix(0, sent)))
					got++
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	for range apps {
		<-ready
	}
	cli, _, err := websocket.Dial(ctx, url+"/ws/cli", hdr)
	if err != nil {
		b.Fatal(err)
	}
	defer cli.CloseNow()
	batch := 100
	tick := time.NewTicker(10 * time.Millisecond) // paced: 10 per 10 ms
	if paced {
		batch = 10
	}
	defer tick.Stop()
	// The frames are made before the clock starts (a CLI's encoding is not
	// the relay's work); each envelope's text, the send time in ns, is
	// written in at the send.
	const stamp = "0000000000000000000" // 19 digits, as UnixNano
	type out struct {
		frame []byte
		at    []int // where the stamps go
	}
	var frames []out
	for i := 0; i < total; i += batch {
		n := min(batch, total-i)
		envs := make([]json.RawMessage, n)
		for k := range n {
			if items != nil {
				envs[k] = items[i+k].Body
				continue
			}
			e := protocol.Envelope{ID: protocol.DeriveID(session, strconv.Itoa(i+k)), Time: 1, Role: protocol.RoleUser, Ev: protocol.Event{T: protocol.KindText, Text: stamp}}
			envs[k], _ = e.AppendJSON(nil)
		}
		f, _ := json.Marshal(protocol.Frame{V: 1, Type: protocol.FrameEnvelopes, Session: session, Envelopes: envs})
		o := out{frame: f}
		for off := 0; ; {
			j := bytes.Index(f[off:], []byte(`"text":"`+stamp))
			if j < 0 {
				break
			}
			o.at = append(o.at, off+j+len(`"text":"`))
			off += j + 1
		}
		frames = append(frames, o)
	}
	start := time.Now()
	acks := make([]time.Duration, 0, len(frames))
	for _, o := range frames {
		if paced {
			<-tick.C
		}
		sent := time.Now()
		now := strconv.AppendInt(nil, sent.UnixNano(), 10)
		for _, at := range o.at {
			copy(o.frame[at:at+len(stamp)], now)
		}
		if err := cli.Write(ctx, websocket.MessageText, o.frame); err != nil {
			b.Fatal(err)
		}
		if _, _, err := cli.Read(ctx); err != nil { // the ack
			b.Fatal(err)
		}
		acks = append(acks, time.Since(sent))
	}
	stored := time.Since(start)
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	slices.Sort(acks)
	return float64(total) / stored.Seconds(), lat, acks
}

func httptestServer(b testing.TB, h http.Handler) string {
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	return srv.URL
}
