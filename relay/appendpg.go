package relay

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// On PostgreSQL an append is one statement, one round trip: the function
// ccrelay_append (schema version 9, and 11 as it is now) runs the steps
// the SQLite path runs one by one (appendTx), in the statement's own
// transaction. Each of its statements reads a new snapshot (a VOLATILE
// function in READ COMMITTED), so once it holds the session's row (FOR
// UPDATE) it sees what every append or delete that held the row before it
// committed, as appendTx does. A run of separate statements paid a round
// trip each (eight for a batch), and on a loaded machine each of them
// waited for the server's process to be scheduled.
//
// One lookup finds whether any id of the batch was stored before (by h:
// envkey.go); if none was and none comes twice, it numbers the batch on
// from the session's last sequence number (the usual case: one INSERT …
// SELECT over the arrays); otherwise it goes one item at a time, so
// numbers stay dense. For an id stored before it returns the stored body,
// which the caller compares.

// Errors the function raises (SQLSTATE).
const (
	pgDeletedState = "CR001" // the session was deleted
	pgLimitState   = "CR002" // a session number or sequence out of range
)

// appendFunction9 is version 9 (pgAppendFunction), as it shipped; version
// 11 replaces it (appendFunction).
const appendFunction9 = `CREATE OR REPLACE FUNCTION ccrelay_append(p_session TEXT, p_now BIGINT, p_ids TEXT[], p_bodies BYTEA[], p_blobs BYTEA[], p_prompts TEXT[], p_channel TEXT, p_notice TEXT)
RETURNS TABLE (seq BIGINT, fresh BOOLEAN, stored BYTEA, s_info TEXT, s_owner TEXT, s_prompt TEXT, s_last BIGINT, s_updated BIGINT)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
	v_no     BIGINT;
	v_last   BIGINT;
	v_prompt TEXT;
	v_info   TEXT;
	v_owner  TEXT;
	v_upd    BIGINT;
	v_next   BIGINT;
	v_base   BIGINT;
	v_n      INT := COALESCE(cardinality(p_ids), 0);
	v_rows   BIGINT;
	i        INT;
BEGIN
	INSERT INTO sessions (id, created_ms, updated_ms) SELECT p_session, p_now, p_now
		WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = p_session) ON CONFLICT (id) DO NOTHING;
	SELECT s.no, s.last_seq, s.prompt, s.info, s.owner, s.updated_ms INTO v_no, v_last, v_prompt, v_info, v_owner, v_upd
		FROM sessions s WHERE s.id = p_session FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'the session was deleted' USING ERRCODE = 'CR001';
	END IF;
	IF EXISTS (SELECT 1 FROM tombstones t WHERE t.id = p_session) THEN
		RAISE EXCEPTION 'the session was deleted' USING ERRCODE = 'CR001';
	END IF;
	IF v_no < 1 OR v_no > 2147483647 THEN
		RAISE EXCEPTION 'session number % is out of range', v_no USING ERRCODE = 'CR002';
	END IF;
	IF v_last + v_n > 4294967295 THEN
		RAISE EXCEPTION 'the session has % envelopes: at most 4294967295 are kept', v_last USING ERRCODE = 'CR002';
	END IF;
	v_base := v_no * 4294967296;
	INSERT INTO envelopes (k, sn, id, body)
		SELECT v_base + v_last + u.o, v_no, u.id, u.body FROM unnest(p_ids, p_bodies) WITH ORDINALITY AS u(id, body, o)
		ON CONFLICT (sn, id) DO NOTHING;
	GET DIAGNOSTICS v_rows = ROW_COUNT;
	IF v_rows = v_n THEN
		INSERT INTO blobs (session, id, data)
			SELECT p_session, u.id, u.data FROM unnest(p_ids, p_blobs) AS u(id, data) WHERE octet_length(u.data) > 0
			ON CONFLICT DO NOTHING;
		IF v_prompt = '' THEN
			SELECT u.p INTO v_prompt FROM unnest(p_prompts) WITH ORDINALITY AS u(p, o) WHERE u.p <> '' ORDER BY u.o LIMIT 1;
			v_prompt := COALESCE(v_prompt, '');
		END IF;
		IF v_n > 0 THEN
			UPDATE sessions SET last_seq = v_last + v_n, updated_ms = p_now, prompt = v_prompt WHERE id = p_session;
			IF p_notice IS NOT NULL THEN
				PERFORM pg_notify(p_channel, p_notice);
			END IF;
		END IF;
		RETURN QUERY SELECT v_last + o, TRUE, NULL::BYTEA, NULL::TEXT, NULL::TEXT, NULL::TEXT, NULL::BIGINT, NULL::BIGINT
			FROM generate_series(1, v_n) AS o;
		-- The session as it is now, in a last row of its own.
		IF v_n > 0 THEN
			v_upd := p_now;
		END IF;
		RETURN QUERY SELECT NULL::BIGINT, NULL::BOOLEAN, NULL::BYTEA, v_info, v_owner, v_prompt, v_last + v_n, v_upd;
		RETURN;
	END IF;
	-- An id stored before: what the statement above inserted goes, and the
	-- items go one by one.
	DELETE FROM envelopes WHERE k > v_base + v_last AND k <= v_base + v_last + v_n;
	v_next := v_last;
	FOR i IN 1 .. v_n LOOP
		INSERT INTO envelopes (k, sn, id, body) VALUES (v_base + v_next + 1, v_no, p_ids[i], p_bodies[i])
			ON CONFLICT (sn, id) DO NOTHING;
		IF FOUND THEN
			v_next := v_next + 1;
			IF octet_length(p_blobs[i]) > 0 THEN
				INSERT INTO blobs (session, id, data) VALUES (p_session, p_ids[i], p_blobs[i]) ON CONFLICT DO NOTHING;
			END IF;
			IF v_prompt = '' AND COALESCE(p_prompts[i], '') <> '' THEN
				v_prompt := p_prompts[i];
			END IF;
			seq := v_next; fresh := TRUE; stored := NULL;
		ELSE
			SELECT e.k & 4294967295, e.body INTO seq, stored FROM envelopes e WHERE e.sn = v_no AND e.id = p_ids[i];
			fresh := FALSE;
		END IF;
		RETURN NEXT;
	END LOOP;
	IF v_next <> v_last THEN
		UPDATE sessions SET last_seq = v_next, updated_ms = p_now, prompt = v_prompt WHERE id = p_session;
		v_upd := p_now;
		IF p_notice IS NOT NULL THEN
			PERFORM pg_notify(p_channel, p_notice);
		END IF;
	END IF;
	-- The session as it is now, in a last row of its own.
	seq := NULL; fresh := NULL; stored := NULL;
	s_info := v_info; s_owner := v_owner; s_prompt := v_prompt; s_last := v_next; s_updated := v_upd;
	RETURN NEXT;
END
$fn$`

// appendFunction is version 11 (envelopesByHashPG): envelopes found by h
// (envkey.go), computed here as in the migration (pgEnvelopeHash). One
// lookup for the batch finds whether any of its ids is stored already;
// none (and none twice in the batch) is the usual case, one INSERT …
// SELECT over the arrays. Otherwise the items go one by one, each looked
// up first (a row of the same h and another id is another envelope).
const appendFunction = `CREATE OR REPLACE FUNCTION ccrelay_append(p_session TEXT, p_now BIGINT, p_ids TEXT[], p_bodies BYTEA[], p_blobs BYTEA[], p_prompts TEXT[], p_channel TEXT, p_notice TEXT)
RETURNS TABLE (seq BIGINT, fresh BOOLEAN, stored BYTEA, s_info TEXT, s_owner TEXT, s_prompt TEXT, s_last BIGINT, s_updated BIGINT)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
	v_no     BIGINT;
	v_last   BIGINT;
	v_prompt TEXT;
	v_info   TEXT;
	v_owner  TEXT;
	v_upd    BIGINT;
	v_next   BIGINT;
	v_base   BIGINT;
	v_n      INT := COALESCE(cardinality(p_ids), 0);
	v_hashes BIGINT[];
	i        INT;
BEGIN
	INSERT INTO sessions (id, created_ms, updated_ms) SELECT p_session, p_now, p_now
		WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = p_session) ON CONFLICT (id) DO NOTHING;
	SELECT s.no, s.last_seq, s.prompt, s.info, s.owner, s.updated_ms INTO v_no, v_last, v_prompt, v_info, v_owner, v_upd
		FROM sessions s WHERE s.id = p_session FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'the session was deleted' USING ERRCODE = 'CR001';
	END IF;
	IF EXISTS (SELECT 1 FROM tombstones t WHERE t.id = p_session) THEN
		RAISE EXCEPTION 'the session was deleted' USING ERRCODE = 'CR001';
	END IF;
	IF v_no < 1 OR v_no > 2147483647 THEN
		RAISE EXCEPTION 'session number % is out of range', v_no USING ERRCODE = 'CR002';
	END IF;
	IF v_last + v_n > 4294967295 THEN
		RAISE EXCEPTION 'the session has % envelopes: at most 4294967295 are kept', v_last USING ERRCODE = 'CR002';
	END IF;
	v_base := v_no * 4294967296;
	SELECT array_agg((v_no << 32) | ('x' || left(md5(u.id), 8))::bit(32)::bigint ORDER BY u.o) INTO v_hashes
		FROM unnest(p_ids) WITH ORDINALITY AS u(id, o);
	IF NOT EXISTS (SELECT 1 FROM envelopes e JOIN unnest(v_hashes, p_ids) AS u(h, id) ON e.h = u.h AND e.id = u.id
			WHERE e.k > v_base AND e.k <= v_base + 4294967295)
		AND (SELECT COUNT(DISTINCT u.id) FROM unnest(p_ids) AS u(id)) = v_n THEN
		INSERT INTO envelopes (k, h, id, body)
			SELECT v_base + v_last + u.o, u.h, u.id, u.body FROM unnest(v_hashes, p_ids, p_bodies) WITH ORDINALITY AS u(h, id, body, o);
		INSERT INTO blobs (session, id, data)
			SELECT p_session, u.id, u.data FROM unnest(p_ids, p_blobs) AS u(id, data) WHERE octet_length(u.data) > 0
			ON CONFLICT DO NOTHING;
		IF v_prompt = '' THEN
			SELECT u.p INTO v_prompt FROM unnest(p_prompts) WITH ORDINALITY AS u(p, o) WHERE u.p <> '' ORDER BY u.o LIMIT 1;
			v_prompt := COALESCE(v_prompt, '');
		END IF;
		IF v_n > 0 THEN
			UPDATE sessions SET last_seq = v_last + v_n, updated_ms = p_now, prompt = v_prompt WHERE id = p_session;
			IF p_notice IS NOT NULL THEN
				PERFORM pg_notify(p_channel, p_notice);
			END IF;
		END IF;
		RETURN QUERY SELECT v_last + o, TRUE, NULL::BYTEA, NULL::TEXT, NULL::TEXT, NULL::TEXT, NULL::BIGINT, NULL::BIGINT
			FROM generate_series(1, v_n) AS o;
		-- The session as it is now, in a last row of its own.
		IF v_n > 0 THEN
			v_upd := p_now;
		END IF;
		RETURN QUERY SELECT NULL::BIGINT, NULL::BOOLEAN, NULL::BYTEA, v_info, v_owner, v_prompt, v_last + v_n, v_upd;
		RETURN;
	END IF;
	-- An id stored before, or twice in the batch: the items one by one.
	v_next := v_last;
	FOR i IN 1 .. v_n LOOP
		SELECT e.k & 4294967295, e.body INTO seq, stored FROM envelopes e
			WHERE e.h = v_hashes[i] AND e.id = p_ids[i] AND e.k > v_base AND e.k <= v_base + 4294967295;
		IF FOUND THEN
			fresh := FALSE;
		ELSE
			v_next := v_next + 1;
			INSERT INTO envelopes (k, h, id, body) VALUES (v_base + v_next, v_hashes[i], p_ids[i], p_bodies[i]);
			IF octet_length(p_blobs[i]) > 0 THEN
				INSERT INTO blobs (session, id, data) VALUES (p_session, p_ids[i], p_blobs[i]) ON CONFLICT DO NOTHING;
			END IF;
			IF v_prompt = '' AND COALESCE(p_prompts[i], '') <> '' THEN
				v_prompt := p_prompts[i];
			END IF;
			seq := v_next; fresh := TRUE; stored := NULL;
		END IF;
		RETURN NEXT;
	END LOOP;
	IF v_next <> v_last THEN
		UPDATE sessions SET last_seq = v_next, updated_ms = p_now, prompt = v_prompt WHERE id = p_session;
		v_upd := p_now;
		IF p_notice IS NOT NULL THEN
			PERFORM pg_notify(p_channel, p_notice);
		END IF;
	END IF;
	-- The session as it is now, in a last row of its own.
	seq := NULL; fresh := NULL; stored := NULL;
	s_info := v_info; s_owner := v_owner; s_prompt := v_prompt; s_last := v_next; s_updated := v_upd;
	RETURN NEXT;
END
$fn$`

// pgAppendFunction makes ccrelay_append (one statement: pgExec would cut
// it at its semicolons).
func pgAppendFunction(ctx context.Context, t sqlTx) error {
	if _, err := t.ExecContext(ctx, appendFunction9); err != nil {
		return fmt.Errorf("create ccrelay_append: %w", err)
	}
	return nil
}

// pgNotice is a notice an append sends on PostgreSQL if it stores
// anything new, in its own transaction (the other nodes hear of it once
// what it stored is there to read).
type pgNotice struct{ channel, payload string }

// appendPG stores items in session through ccrelay_append, in one round
// trip (its own transaction), and returns what became of each (see Append)
// and the session as the append left it.
func (s *Store) appendPG(ctx context.Context, session string, items []Item, notice *pgNotice) ([]Appended, *SessionInfo, error) {
	ids := make([]string, len(items))
	bodies := make([][]byte, len(items))
	blobs := make([][]byte, len(items))
	prompts := make([]string, len(items))
	for i, it := range items {
		if it.ID == "" {
			return nil, nil, fmt.Errorf("envelope %d has no id", i)
		}
		ids[i], bodies[i], blobs[i] = it.ID, encodeBody(it.ID, it.Body), it.Blob
		prompts[i] = promptOf(it.Body)
	}
	var channel, payload *string
	if notice != nil {
		channel, payload = &notice.channel, &notice.payload
	}
	rows, err := s.w.QueryContext(ctx, `SELECT seq, fresh, stored, s_info, s_owner, s_prompt, s_last, s_updated FROM ccrelay_append(?, ?, ?, ?, ?, ?, ?, ?)`,
		session, s.clock().UnixMilli(), ids, bodies, blobs, prompts, channel, payload)
	if err != nil {
		return nil, nil, pgAppendError(err)
	}
	defer rows.Close()
	out := make([]Appended, 0, len(items))
	var si *SessionInfo
	for rows.Next() {
		var seq, last, updated sql.NullInt64
		var fresh sql.NullBool
		var stored []byte
		var info, owner, prompt sql.NullString
		if err := rows.Scan(&seq, &fresh, &stored, &info, &owner, &prompt, &last, &updated); err != nil {
			return nil, nil, pgAppendError(err)
		}
		if !seq.Valid { // the session's row
			si = &SessionInfo{ID: session, Info: json.RawMessage(info.String), Owner: owner.String, Prompt: prompt.String, LastSeq: last.Int64, UpdatedMS: updated.Int64}
			continue
		}
		i := len(out)
		if i >= len(items) {
			return nil, nil, fmt.Errorf("ccrelay_append returned more rows than items")
		}
		a := Appended{Seq: seq.Int64, New: fresh.Bool}
		if !a.New {
			body, err := decodeBody(items[i].ID, stored)
			if err != nil {
				return nil, nil, fmt.Errorf("envelope %s: %w", items[i].ID, err)
			}
			a.Conflict = !bytes.Equal(body, items[i].Body)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, pgAppendError(err)
	}
	if len(out) != len(items) || si == nil {
		return nil, nil, fmt.Errorf("ccrelay_append returned %d rows for %d items", len(out), len(items))
	}
	return out, si, nil
}

// pgAppendError is ErrDeleted for the function's CR001, err otherwise.
func pgAppendError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == pgDeletedState {
		return ErrDeleted
	}
	return err
}
