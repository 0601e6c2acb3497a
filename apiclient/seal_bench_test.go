package apiclient

import (
	"bufio"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/seal"
)

// benchEnvelopes are n envelopes of a real session (a public corpus
// session's golden output, repeated under fresh ids).
func benchEnvelopes(b *testing.B, session string, n int) []protocol.Envelope {
	b.Helper()
	f, err := os.Open("../testdata/golden/public/spotter/test/fixtures/transcripts/fa812bfe-b295-4cca-9c2f-fdf01028cb46.golden.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var src []protocol.Envelope
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e protocol.Envelope
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			b.Fatal(err)
		}
		src = append(src, e)
	}
	out := make([]protocol.Envelope, n)
	for i := range out {
		out[i] = src[i%len(src)]
		out[i].ID = protocol.DeriveID(session, fmt.Sprint(i))
		if out[i].Turn != "" {
			out[i].Turn = protocol.DeriveID(session, "turn", fmt.Sprint(i/len(src)), out[i].Turn)
		}
		if out[i].Ev.T == protocol.KindToolCallEnd && out[i].Ev.Full > 0 {
			out[i].Ev.Full, out[i].Ev.Truncated = 0, true // no blob to send
		}
	}
	return out
}

// BenchmarkSendThroughRelay: a real session's envelopes appended to the
// outbox and sent to a relay on loopback until every one is stored, in
// plaintext and sealed for one device (issue goal: sealed < 15% slower).
// Reports envelopes/s.
func BenchmarkSendThroughRelay(b *testing.B) {
	for _, sealed := range []bool{false, true} {
		name := "plain"
		if sealed {
			name = "sealed"
		}
		b.Run(name, func(b *testing.B) {
			const n = 5000
			for b.Loop() {
				b.StopTimer()
				r := newRelay(b)
				envs := benchEnvelopes(b, sessA, n)
				opts := OutboxOptions{}
				var kr *Keyring
				if sealed {
					dev, _ := seal.GenerateKeyPair()
					machine, _ := ecdh.X25519().GenerateKey(rand.Reader)
					kr, _ = OpenKeyring(b.TempDir(), machine)
					kr.Trust(TrustedDevice{ID: "d1", Name: "phone", PublicKey: dev.Public().Bytes()})
					opts.Sealer = kr
				}
				box, err := OpenOutboxWith(b.TempDir(), opts)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				for i := 0; i < n; i += 100 {
					if err := box.Append(context.Background(), sessA, envs[i:min(i+100, n)]); err != nil {
						b.Fatal(err)
					}
				}
				rc := runClient(Config{URL: "http://" + r.addr, Token: token, Keyring: kr}, box)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				if err := rc.cl.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				cancel()
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "envelopes/s")
				b.StopTimer()
				rc.cancel()
				<-rc.done
				box.Close()
				r.halt()
				b.StartTimer()
			}
		})
	}
}
