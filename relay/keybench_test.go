package relay

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// BenchmarkEnvelopeKey measures what an envelope's (session, id) key
// costs on a store of 100,000 real envelopes (realItems, about 1 KB each,
// ten sessions of 10,000, stored in batches of 100): the bytes of the
// pages in use (db-bytes) and of the envelopes table's indexes other than
// its integer key (key-index-bytes, and per envelope), then, each
// iteration, the time per envelope of a batch of 100 new envelopes
// appended (append-us/envelope) and of the same 100 sent again, each
// found a duplicate (resend-us/envelope).
func BenchmarkEnvelopeKey(b *testing.B) {
	const sessions, per, batch = 10, 10000, 100
	ctx := context.Background()
	s, err := OpenStore(filepath.Join(b.TempDir(), "relay.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	gold := realItems(b, s1, batch)
	for n := range sessions {
		session := protocol.DeriveID("key-bench", strconv.Itoa(n))
		items := realItems(b, session, per)
		for i := 0; i < per; i += batch {
			if _, err := s.Append(ctx, session, items[i:i+batch]); err != nil {
				b.Fatal(err)
			}
		}
	}
	var used, index int64
	if err := s.w.QueryRowContext(ctx, `SELECT (page_count - freelist_count) * page_size FROM pragma_page_count(), pragma_freelist_count(), pragma_page_size()`).Scan(&used); err != nil {
		b.Fatal(err)
	}
	if err := s.w.QueryRowContext(ctx, `SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN (SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'envelopes')`).Scan(&index); err != nil {
		b.Fatal(err)
	}
	var appendT, resendT time.Duration
	next := 0
	for b.Loop() {
		items := make([]Item, batch)
		for i := range items {
			next++
			id := protocol.DeriveID("key-bench-new", strconv.Itoa(next))
			items[i] = Item{ID: id, Body: gold[i].Body}
		}
		start := time.Now()
		if _, err := s.Append(ctx, s1, items); err != nil {
			b.Fatal(err)
		}
		appendT += time.Since(start)
		start = time.Now()
		res, err := s.Append(ctx, s1, items)
		if err != nil {
			b.Fatal(err)
		}
		resendT += time.Since(start)
		if res[0].New {
			b.Fatal("a resent envelope was stored again")
		}
	}
	envs := float64(b.N * batch)
	b.ReportMetric(float64(used), "db-bytes")
	b.ReportMetric(float64(index), "key-index-bytes")
	b.ReportMetric(float64(index)/(sessions*per), "key-index-bytes/envelope")
	b.ReportMetric(float64(appendT.Microseconds())/envs, "append-us/envelope")
	b.ReportMetric(float64(resendT.Microseconds())/envs, "resend-us/envelope")
	b.ReportMetric(0, "ns/op")
}
