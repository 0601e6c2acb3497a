package relay

import (
	"context"
	"fmt"
)

// The sessions a CLI holds are kept in the store (cli_held) until a mark
// settles them (markCLIGone): the marks a relay would make when a CLI's
// connection ends die with the relay if it stops first, and the next
// relay marks what these rows name rather than every idle session it
// stores, most of which ended long before.

// heldMark is a session of cli_held: its owner, and whether the CLI that
// held it last closed its connection itself.
type heldMark struct {
	owner   string
	stopped bool
}

// markHeld records that a CLI of owner holds session from now on.
func (s *Store) markHeld(ctx context.Context, session, owner string) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO cli_held (session, owner, since_ms, stopped) VALUES (?, ?, ?, 0)
		ON CONFLICT (session) DO UPDATE SET owner = excluded.owner, since_ms = excluded.since_ms, stopped = 0`,
		session, owner, s.clock().UnixMilli())
	if err != nil {
		return fmt.Errorf("record that a CLI holds %s: %w", session, err)
	}
	return nil
}

// markStopped records that the CLI that held sessions closed its
// connection itself (ccrelay stopped).
func (s *Store) markStopped(ctx context.Context, sessions []string) error {
	for _, session := range sessions {
		if _, err := s.w.ExecContext(ctx, `UPDATE cli_held SET stopped = 1 WHERE session = ?`, session); err != nil {
			return fmt.Errorf("record that the CLI of %s stopped: %w", session, err)
		}
	}
	return nil
}

// heldMarks lists cli_held by session.
func (s *Store) heldMarks(ctx context.Context) (map[string]heldMark, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT session, owner, stopped FROM cli_held`)
	if err != nil {
		return nil, fmt.Errorf("list the sessions CLIs held: %w", err)
	}
	defer rows.Close()
	marks := map[string]heldMark{}
	for rows.Next() {
		var session, owner string
		var stopped int64
		if err := rows.Scan(&session, &owner, &stopped); err != nil {
			return nil, fmt.Errorf("list the sessions CLIs held: %w", err)
		}
		marks[session] = heldMark{owner: owner, stopped: stopped != 0}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the sessions CLIs held: %w", err)
	}
	return marks, nil
}

// dropHeld removes session from cli_held unless a CLI took it at before
// (Unix ms, the store's clock) or later.
func (s *Store) dropHeld(ctx context.Context, session string, before int64) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM cli_held WHERE session = ? AND since_ms < ?`, session, before); err != nil {
		return fmt.Errorf("settle the mark of %s: %w", session, err)
	}
	return nil
}
