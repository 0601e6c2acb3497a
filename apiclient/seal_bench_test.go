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

// sendOnce appends n envelopes of a real session to a fresh outbox and
// sends them to a fresh relay on loopback until every one is stored,
// sealed for one device or in plaintext. It returns the time from the
// first append to the last acknowledgement, and the CPU time the process
// (the CLI's side and the relay's) used meanwhile; the setup is not
// counted.
func sendOnce(b *testing.B, sealed bool, n int) (took, cpu time.Duration) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	r := newRelay(b)
	envs := benchEnvelopes(b, sessA, n)
	opts := OutboxOptions{}
	var kr *Keyring
	if sealed {
		dev, err := seal.GenerateKeyPair()
		if err != nil {
			b.Fatal(err)
		}
		machine, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		if kr, err = OpenKeyring(b.TempDir(), machine); err != nil {
			b.Fatal(err)
		}
		if err := kr.Trust(TrustedDevice{ID: "d1", Name: "phone", PublicKey: dev.Public().Bytes()}); err != nil {
			b.Fatal(err)
		}
		opts.Sealer = kr
	}
	box, err := OpenOutboxWith(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer box.Close()
	defer r.halt()
	b.StartTimer()
	start, cpu0 := time.Now(), cpuTime()
	for i := 0; i < n; i += 100 {
		if err := box.Append(context.Background(), sessA, envs[i:min(i+100, n)]); err != nil {
			b.Fatal(err)
		}
	}
	rc := runClient(Config{URL: "http://" + r.addr, Token: token, Keyring: kr}, box)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := rc.cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	took, cpu = time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	rc.cancel()
	<-rc.done
	return took, cpu
}

// BenchmarkSendThroughRelay: a real session's envelopes appended to the
// outbox and sent to a relay on loopback until every one is stored, in
// plaintext and sealed for one device. Reports envelopes/s.
func BenchmarkSendThroughRelay(b *testing.B) {
	const n = 5000
	for _, sealed := range []bool{false, true} {
		name := "plain"
		if sealed {
			name = "sealed"
		}
		b.Run(name, func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				took, _ := sendOnce(b, sealed, n)
				total += took
			}
			b.ReportMetric(float64(n*b.N)/total.Seconds(), "envelopes/s")
		})
	}
}

// BenchmarkSealedSendRatio: the cost of sealing on the send path, measured
// in one run: each iteration sends the same session in plaintext and
// sealed (in turn first, so that a machine busy at one moment weighs on
// both), and the benchmark reports sealed time over plaintext time (issue
// goal: at most 1.15), in wall time (sealed/plain) and in the CPU time
// the process used (sealed/plain-cpu, steadier on a busy machine).
// benchstat compares the metrics between runs.
func BenchmarkSealedSendRatio(b *testing.B) {
	const n = 5000
	var plain, sealed, plainCPU, sealedCPU time.Duration
	add := func(sealing bool) {
		took, cpu := sendOnce(b, sealing, n)
		if sealing {
			sealed, sealedCPU = sealed+took, sealedCPU+cpu
		} else {
			plain, plainCPU = plain+took, plainCPU+cpu
		}
	}
	i := 0
	for b.Loop() {
		add(i%2 == 1)
		add(i%2 == 0)
		i++
	}
	b.ReportMetric(sealed.Seconds()/plain.Seconds(), "sealed/plain")
	if plainCPU > 0 {
		b.ReportMetric(sealedCPU.Seconds()/plainCPU.Seconds(), "sealed/plain-cpu")
	}
	b.ReportMetric(float64(n*b.N)/plain.Seconds(), "plain-envelopes/s")
	b.ReportMetric(float64(n*b.N)/sealed.Seconds(), "sealed-envelopes/s")
	b.ReportMetric(0, "ns/op")
}
