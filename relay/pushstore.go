package relay

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ccrelay/ccrelay/push"
)

// What notifications keep in the store, shared by the relays on one
// database (schema version 7):
//
//   - push_devices: each device's subscription, by owner and device key
//     (pushDeviceKey), with the kinds it chose and when it subscribed;
//   - relay_keys: keys every relay uses alike, by name: the VAPID key pair
//     (vapidKeyName), which the subscriptions were made with;
//   - push_visible: the app connections that said they show a session, by
//     node and connection, refreshed with cli_presence (PostgreSQL only:
//     SQLite's one relay keeps them in memory).
const pushTables = `CREATE TABLE IF NOT EXISTS push_devices (
	owner        TEXT NOT NULL,
	device       TEXT NOT NULL,
	subscription TEXT NOT NULL,
	kinds        TEXT NOT NULL,
	updated_ms   INTEGER NOT NULL,
	PRIMARY KEY (owner, device)
);
CREATE TABLE IF NOT EXISTS relay_keys (
	name  TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS push_visible (
	node       TEXT NOT NULL,
	conn       INTEGER NOT NULL,
	owner      TEXT NOT NULL,
	device     TEXT NOT NULL,
	session    TEXT NOT NULL,
	visible    INTEGER NOT NULL,
	updated_ms INTEGER NOT NULL,
	PRIMARY KEY (node, conn)
);
CREATE INDEX IF NOT EXISTS push_visible_by_session ON push_visible (owner, session)`

// vapidKeyName is the VAPID key pair's row in relay_keys (PEM, as
// push.MarshalKeys writes it).
const vapidKeyName = "vapid"

// --- subscriptions ------------------------------------------------------------

// putPushDevice keeps owner's device's subscription (replacing its
// previous one); beyond max devices, the least recently updated others
// are removed.
func (s *Store) putPushDevice(ctx context.Context, owner, device string, d pushDevice, max int) error {
	sub, kinds, err := marshalPushDevice(d)
	if err != nil {
		return err
	}
	t, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("save push subscription: %w", err)
	}
	defer t.Rollback()
	if _, err := t.ExecContext(ctx, putPushDeviceSQL, owner, device, sub, kinds, d.Updated); err != nil {
		return fmt.Errorf("save push subscription: %w", err)
	}
	if err := trimPushDevices(ctx, t, owner, device, max); err != nil {
		return err
	}
	if err := t.Commit(); err != nil {
		return fmt.Errorf("save push subscription: %w", err)
	}
	return nil
}

// putPushDeviceSQL keeps a device's subscription, replacing the one it had.
const putPushDeviceSQL = `INSERT INTO push_devices (owner, device, subscription, kinds, updated_ms) VALUES (?, ?, ?, ?, ?)
	ON CONFLICT (owner, device) DO UPDATE SET subscription = excluded.subscription, kinds = excluded.kinds, updated_ms = excluded.updated_ms`

// trimPushDevices removes owner's devices beyond max, least recently
// updated first, never keep (when given).
func trimPushDevices(ctx context.Context, t sqlTx, owner, keep string, max int) error {
	others := max
	if keep != "" {
		others-- // keep is one of the max
	}
	_, err := t.ExecContext(ctx, `DELETE FROM push_devices WHERE owner = ? AND device <> ? AND device NOT IN
		(SELECT device FROM push_devices WHERE owner = ? AND device <> ? ORDER BY updated_ms DESC, device LIMIT ?)`,
		owner, keep, owner, keep, others)
	if err != nil {
		return fmt.Errorf("bound push subscriptions: %w", err)
	}
	return nil
}

func marshalPushDevice(d pushDevice) (sub, kinds string, err error) {
	b, err := json.Marshal(d.Sub)
	if err != nil {
		return "", "", fmt.Errorf("push subscription: %w", err)
	}
	k := d.Kinds
	if k == nil {
		k = []string{}
	}
	kb, err := json.Marshal(k)
	if err != nil {
		return "", "", fmt.Errorf("push subscription: %w", err)
	}
	return string(b), string(kb), nil
}

func scanPushDevice(sc interface{ Scan(...any) error }) (string, pushDevice, error) {
	var device, sub, kinds string
	var d pushDevice
	if err := sc.Scan(&device, &sub, &kinds, &d.Updated); err != nil {
		return "", d, err
	}
	if err := json.Unmarshal([]byte(sub), &d.Sub); err != nil {
		return "", d, fmt.Errorf("push subscription of %s: %w", device, err)
	}
	if err := json.Unmarshal([]byte(kinds), &d.Kinds); err != nil {
		return "", d, fmt.Errorf("push kinds of %s: %w", device, err)
	}
	return device, d, nil
}

// pushDevice returns owner's device's subscription; ok is false when
// there is none.
func (s *Store) pushDevice(ctx context.Context, owner, device string) (d pushDevice, ok bool, err error) {
	_, d, err = scanPushDevice(s.r.QueryRowContext(ctx, `SELECT device, subscription, kinds, updated_ms FROM push_devices WHERE owner = ? AND device = ?`, owner, device))
	if errors.Is(err, sql.ErrNoRows) {
		return d, false, nil
	}
	if err != nil {
		return d, false, fmt.Errorf("read push subscription: %w", err)
	}
	return d, true, nil
}

// pushDevicesOf returns owner's subscriptions by device.
func (s *Store) pushDevicesOf(ctx context.Context, owner string) (map[string]pushDevice, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT device, subscription, kinds, updated_ms FROM push_devices WHERE owner = ?`, owner)
	if err != nil {
		return nil, fmt.Errorf("read push subscriptions: %w", err)
	}
	defer rows.Close()
	out := map[string]pushDevice{}
	for rows.Next() {
		dev, d, err := scanPushDevice(rows)
		if err != nil {
			return nil, fmt.Errorf("read push subscriptions: %w", err)
		}
		out[dev] = d
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read push subscriptions: %w", err)
	}
	return out, nil
}

// deletePushDevice removes owner's device's subscription; when only is
// given, only if the device still has that subscription (it did not
// subscribe again meanwhile). It reports whether one was removed.
func (s *Store) deletePushDevice(ctx context.Context, owner, device string, only *push.Subscription) (bool, error) {
	q, args := `DELETE FROM push_devices WHERE owner = ? AND device = ?`, []any{owner, device}
	if only != nil {
		sub, _, err := marshalPushDevice(pushDevice{Sub: *only})
		if err != nil {
			return false, err
		}
		q, args = q+` AND subscription = ?`, append(args, sub)
	}
	res, err := s.w.ExecContext(ctx, q, args...)
	if err != nil {
		return false, fmt.Errorf("delete push subscription: %w", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// forgetPushDevices removes the subscriptions of a credential's devices
// (their keys start with its id and a colon), of every owner.
func (s *Store) forgetPushDevices(ctx context.Context, credID string) (int64, error) {
	esc := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(credID)
	res, err := s.w.ExecContext(ctx, `DELETE FROM push_devices WHERE device LIKE ? ESCAPE '\'`, esc+":%")
	if err != nil {
		return 0, fmt.Errorf("forget push subscriptions: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// importPushDevices keeps subscriptions an older relay kept in a file
// (owner -> device -> subscription): a device the store already has keeps
// the more recent of the two; each owner keeps its max most recent.
func (s *Store) importPushDevices(ctx context.Context, all map[string]map[string]*pushDevice, max int) (int, error) {
	t, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("import push subscriptions: %w", err)
	}
	defer t.Rollback()
	n := 0
	for owner, devs := range all {
		for device, d := range devs {
			if d == nil || device == "" {
				continue
			}
			sub, kinds, err := marshalPushDevice(*d)
			if err != nil {
				return 0, err
			}
			// A device the store has kept since is left as it is.
			if _, err := t.ExecContext(ctx, putPushDeviceSQL+` WHERE excluded.updated_ms > push_devices.updated_ms`, owner, device, sub, kinds, d.Updated); err != nil {
				return 0, fmt.Errorf("import push subscriptions: %w", err)
			}
			n++
		}
		if err := trimPushDevices(ctx, t, owner, "", max); err != nil {
			return 0, err
		}
	}
	if err := t.Commit(); err != nil {
		return 0, fmt.Errorf("import push subscriptions: %w", err)
	}
	return n, nil
}

// --- keys shared by the relays ------------------------------------------------

// sharedKey returns the value of relay_keys' row name: the one stored, or
// else the one first returns, stored. When several relays start at once
// the first to store its value wins and each returns that one.
func (s *Store) sharedKey(ctx context.Context, name string, first func() (string, error)) (string, error) {
	var v string
	err := s.r.QueryRowContext(ctx, `SELECT value FROM relay_keys WHERE name = ?`, name).Scan(&v)
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("read key %s: %w", name, err)
	}
	mine, err := first()
	if err != nil {
		return "", err
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO relay_keys (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, mine); err != nil {
		return "", fmt.Errorf("store key %s: %w", name, err)
	}
	if err := s.w.QueryRowContext(ctx, `SELECT value FROM relay_keys WHERE name = ?`, name).Scan(&v); err != nil {
		return "", fmt.Errorf("read key %s: %w", name, err)
	}
	return v, nil
}

// PushKeys returns the VAPID key pair every relay on this store signs its
// pushes with: the one stored; else, the first time, the key file an
// older relay kept in the data folder dir (push.KeyFile: the devices it
// subscribed keep working), or a new one. On PostgreSQL the first relay
// to start stores its key; the others take that one.
func (s *Store) PushKeys(ctx context.Context, dir string) (*push.Keys, error) {
	v, err := s.sharedKey(ctx, vapidKeyName, func() (string, error) {
		var k *push.Keys
		err := os.ErrNotExist
		if dir != "" {
			k, err = push.ReadKeyFile(dir)
		}
		if errors.Is(err, os.ErrNotExist) {
			k, err = push.NewKeys()
		}
		if err != nil {
			return "", err
		}
		b, err := push.MarshalKeys(k)
		return string(b), err
	})
	if err != nil {
		return nil, err
	}
	k, err := push.ParseKeys([]byte(v))
	if err != nil {
		return nil, fmt.Errorf("the store's %w", err)
	}
	return k, nil
}

// --- visibility across relays (PostgreSQL) --------------------------------------

// putVisible records what a connection of node shows.
func (s *Store) putVisible(ctx context.Context, node string, conn int64, v pushVisibility) error {
	vis := 0
	if v.visible {
		vis = 1
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO push_visible (node, conn, owner, device, session, visible, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (node, conn) DO UPDATE SET owner = excluded.owner, device = excluded.device, session = excluded.session, visible = excluded.visible, updated_ms = excluded.updated_ms`,
		node, conn, v.owner, v.device, v.session, vis, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("record visibility: %w", err)
	}
	return nil
}

// dropVisible forgets a connection of node (conn < 0: all of node's).
func (s *Store) dropVisible(ctx context.Context, node string, conn int64) error {
	q, args := `DELETE FROM push_visible WHERE node = ?`, []any{node}
	if conn >= 0 {
		q, args = q+` AND conn = ?`, append(args, conn)
	}
	if _, err := s.w.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("forget visibility: %w", err)
	}
	return nil
}

// refreshVisible says node's connections are still there, and removes
// the rows of relays gone for a while (a relay that stopped removes its
// own; one that crashed cannot).
func (s *Store) refreshVisible(ctx context.Context, node string, now time.Time) error {
	if _, err := s.w.ExecContext(ctx, `UPDATE push_visible SET updated_ms = ? WHERE node = ?`, now.UnixMilli(), node); err != nil {
		return fmt.Errorf("refresh visibility: %w", err)
	}
	if _, err := s.w.ExecContext(ctx, `DELETE FROM push_visible WHERE updated_ms < ?`, now.Add(-visibleForgotten).UnixMilli()); err != nil {
		return fmt.Errorf("forget stale visibility: %w", err)
	}
	return nil
}

// visibleForgotten: a visibility row not refreshed for this long (a
// relay that crashed) is removed; from presenceStale on it is ignored.
const visibleForgotten = 4 * presenceStale

// visibleDevices returns the devices of owner (by device key; "" for a
// connection that named none) that some relay's connection said show
// session visibly, since since.
func (s *Store) visibleDevices(ctx context.Context, owner, session string, since time.Time) (map[string]bool, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT DISTINCT device FROM push_visible WHERE owner = ? AND session = ? AND visible = 1 AND updated_ms > ?`,
		owner, session, since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("read visibility: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var dev string
		if err := rows.Scan(&dev); err != nil {
			return nil, fmt.Errorf("read visibility: %w", err)
		}
		out[dev] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read visibility: %w", err)
	}
	return out, nil
}
