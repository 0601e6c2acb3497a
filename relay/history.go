package relay

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/ccrelay/ccrelay/protocol"
)

// A session's history goes to an app in large frames, each read with one
// query and built from the stored rows as they come: each body is decoded
// from its stored form (codec.go) straight into the frame, with no copy of
// its own and no re-encoding.
const (
	// historyFrameBytes ends a history frame once its envelopes' JSON
	// reaches it (a frame holds at least one envelope, which is at most
	// protocol.MaxEnvelopeBytes: a frame stays under MaxFrameBytes).
	historyFrameBytes = 2 << 20
	// historyRows bounds the rows one query of history reads.
	historyRows = 4096
)

// historyFrame reads the envelopes of session with a sequence number above
// after (and below before, when before is above 0), as many as one history
// frame takes, and returns that batch frame built in buf's memory (nil
// when there is none), the last sequence number in it, and whether more
// may follow it.
func (s *Store) historyFrame(ctx context.Context, buf []byte, session string, after, before int64) (frame []byte, last int64, more bool, err error) {
	limit := int64(historyRows)
	if before > 0 {
		limit = min(limit, before-1-after)
	}
	if after < 0 || after >= maxSeq || limit <= 0 {
		return nil, after, false, nil
	}
	s.reads.Add(1)
	rows, err := s.r.QueryContext(ctx, `SELECT e.k, e.id, e.body FROM sessions s, envelopes e
		WHERE s.id = ? AND e.k > s.no * 4294967296 + ? AND e.k <= s.no * 4294967296 + 4294967295 ORDER BY e.k LIMIT ?`, session, after, limit)
	if err != nil {
		return nil, after, false, fmt.Errorf("read %s: %w", session, err)
	}
	defer rows.Close()
	b := appendBatchStart(buf[:0], session)
	start, n := len(b), int64(0)
	last = after
	var k int64
	var id string
	var stored sql.RawBytes // the driver's memory, valid until the next row
	for rows.Next() {
		if err := rows.Scan(&k, &id, &stored); err != nil {
			return nil, after, false, fmt.Errorf("read %s: %w", session, err)
		}
		last = k & maxSeq
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"seq":`...)
		b = strconv.AppendInt(b, last, 10)
		b = append(b, `,"envelope":`...)
		if b, err = appendBody(b, id, stored); err != nil {
			return nil, after, false, fmt.Errorf("read %s envelope %d: %w", session, last, err)
		}
		b = append(b, '}')
		n++
		if len(b)-start >= historyFrameBytes {
			more = true
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, after, false, fmt.Errorf("read %s: %w", session, err)
	}
	if n == 0 {
		return nil, after, false, nil
	}
	return append(b, "]}"...), last, more || n == limit, nil
}

// appendBatchStart appends the start of a batch frame of session, up to
// its items' opening bracket (the bytes json.Marshal would give).
func appendBatchStart(b []byte, session string) []byte {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, protocol.FrameVersion, 10)
	b = append(b, `,"type":"`+protocol.FrameBatch+`","session":`...)
	sess, _ := json.Marshal(session)
	b = append(b, sess...)
	return append(b, `,"items":[`...)
}
