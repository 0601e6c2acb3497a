package relay

// Accounts, machines and devices. An account owns sessions; a credential
// (a machine's or a device's) belongs to an account and has one role. The
// store keeps a SHA-256 of each credential, never the credential: a
// credential is 256 random bits, so a fast hash is enough to make the
// stored value useless to whoever reads the database.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// Roles of a credential. A machine (a CLI) writes envelopes and answers
// commands on /ws/cli; a device (an app) reads and sends commands on
// /ws/app and /status. Neither may use the other's endpoints. The relay's
// token file holds bootstrap tokens, which may do both (see Server.auth).
const (
	RoleMachine   = "machine"
	RoleDevice    = "device"
	RoleBootstrap = "bootstrap"
)

// Limits of accounts and credentials (docs/protocol.md, "Limits: accounts
// and pairing").
const (
	// MaxCredentialName bounds a machine's or device's name, in runes.
	MaxCredentialName = 64
	// MaxCredentials bounds the machines and devices of one account.
	MaxCredentials = 256
	// lastSeenEvery: a credential's last seen time and address are written
	// at most this often (and when the address changes), not on every
	// request.
	lastSeenEvery = time.Minute
)

// credentialPrefix starts every credential, so that a leaked one is easy
// to recognise (secret scanners, logs).
const credentialPrefix = "ccr_"

const accountsSchema = `
CREATE TABLE IF NOT EXISTS accounts (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	is_default INTEGER NOT NULL DEFAULT 0,
	created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS credentials (
	id           TEXT PRIMARY KEY,
	account      TEXT NOT NULL REFERENCES accounts(id),
	role         TEXT NOT NULL CHECK (role IN ('machine', 'device')),
	name         TEXT NOT NULL,
	hash         BLOB NOT NULL UNIQUE,
	public_key   BLOB,
	created_ms   INTEGER NOT NULL,
	last_seen_ms INTEGER NOT NULL DEFAULT 0,
	last_addr    TEXT NOT NULL DEFAULT '',
	UNIQUE (account, name)
);
`

// Credential is a machine or a device, as the relay knows it.
type Credential struct {
	ID        string `json:"id"`
	Account   string `json:"-"`
	Role      string `json:"role"`
	Name      string `json:"name"`
	CreatedMS int64  `json:"created"`
	LastSeen  int64  `json:"lastSeen"` // ms since the epoch; 0: never
	LastAddr  string `json:"address"`
	PublicKey []byte `json:"publicKey,omitempty"` // X25519, when the credential's holder sent one
}

// ErrNoCredential: no such credential (unknown, revoked, or another
// account's).
var ErrNoCredential = errors.New("no such machine or device")

// ErrTooManyCredentials: the account has MaxCredentials machines and
// devices already.
var ErrTooManyCredentials = errors.New("the account has the most machines and devices it may have; revoke some first")

func hashCredential(secret string) []byte {
	sum := sha256.Sum256([]byte("ccrelay-credential:" + secret))
	return sum[:]
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// DefaultAccount returns the id of the relay's default account, creating
// it (with id, or a random id when id is "") if there is none.
func (s *Store) DefaultAccount(ctx context.Context, id string) (string, error) {
	var got string
	err := s.w.QueryRowContext(ctx, `SELECT id FROM accounts WHERE is_default = 1`).Scan(&got)
	if err == nil {
		return got, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("default account: %w", err)
	}
	if id == "" {
		id = randomHex(8)
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO accounts (id, name, is_default, created_ms) VALUES (?, 'default', 1, ?)`, id, s.clock().UnixMilli()); err != nil {
		return "", fmt.Errorf("create the default account: %w", err)
	}
	return id, nil
}

// EnsureAccount creates the account id (named name) unless it exists.
func (s *Store) EnsureAccount(ctx context.Context, id, name string) error {
	if _, err := s.w.ExecContext(ctx, `INSERT INTO accounts (id, name, created_ms) VALUES (?, ?, ?) ON CONFLICT(id) DO NOTHING`, id, name, s.clock().UnixMilli()); err != nil {
		return fmt.Errorf("create account %s: %w", name, err)
	}
	return nil
}

// AdoptSessions gives account the sessions (and their commands) of owner:
// the sessions of a token the relay used to key them by move to the
// account, so that they survive the token.
func (s *Store) AdoptSessions(ctx context.Context, owner, account string) (int64, error) {
	if owner == account {
		return 0, nil
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("adopt sessions: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE sessions SET owner = ? WHERE owner = ?`, account, owner)
	if err != nil {
		return 0, fmt.Errorf("adopt sessions: %w", err)
	}
	n, _ := res.RowsAffected()
	// A command whose id the account already has in that session stays
	// (SQLite's UPDATE OR IGNORE, said in SQL both engines take).
	if _, err := tx.ExecContext(ctx, `UPDATE commands SET owner = ? WHERE owner = ? AND NOT EXISTS
		(SELECT 1 FROM commands c WHERE c.owner = ? AND c.session = commands.session AND c.id = commands.id)`, account, owner, account); err != nil {
		return 0, fmt.Errorf("adopt commands: %w", err)
	}
	return n, tx.Commit()
}

// CleanName makes a machine's or device's name: control characters and
// bidirectional controls dropped (protocol.CleanName), spaces folded, at
// most MaxCredentialName runes. "" when nothing is left.
func CleanName(name string) string { return protocol.CleanName(name, MaxCredentialName) }

// AddCredential makes a credential of role for account, named name (a
// number is added when the name is taken), and returns it with its secret:
// the only time the secret exists outside its holder.
func (s *Store) AddCredential(ctx context.Context, account, role, name string, publicKey []byte) (Credential, string, error) {
	if role != RoleMachine && role != RoleDevice {
		return Credential{}, "", fmt.Errorf("add credential: role %q is neither machine nor device", role)
	}
	base := CleanName(name)
	if base == "" {
		base = role
	}
	var n int
	if err := s.w.QueryRowContext(ctx, `SELECT COUNT(*) FROM credentials WHERE account = ?`, account).Scan(&n); err != nil {
		return Credential{}, "", fmt.Errorf("add credential: %w", err)
	}
	if n >= MaxCredentials {
		return Credential{}, "", fmt.Errorf("add credential: %d of %d: %w", n, MaxCredentials, ErrTooManyCredentials)
	}
	secret := credentialPrefix + randomHex(32)
	c := Credential{ID: randomHex(8), Account: account, Role: role, CreatedMS: s.clock().UnixMilli(), PublicKey: publicKey}
	for i := 1; ; i++ {
		c.Name = base
		if i > 1 {
			suffix := fmt.Sprintf(" %d", i)
			r := []rune(base)
			if len(r)+len(suffix) > MaxCredentialName {
				r = r[:MaxCredentialName-len(suffix)]
			}
			c.Name = string(r) + suffix
		}
		res, err := s.w.ExecContext(ctx, `INSERT INTO credentials (id, account, role, name, hash, public_key, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(account, name) DO NOTHING`,
			c.ID, account, role, c.Name, hashCredential(secret), publicKey, c.CreatedMS)
		if err != nil {
			return Credential{}, "", fmt.Errorf("add credential: %w", err)
		}
		if k, _ := res.RowsAffected(); k == 1 {
			return c, secret, nil
		}
		if i > MaxCredentials {
			return Credential{}, "", fmt.Errorf("add credential: no free name like %q", base)
		}
	}
}

const credentialColumns = `id, account, role, name, created_ms, last_seen_ms, last_addr, public_key`

func scanCredential(sc interface{ Scan(...any) error }) (Credential, error) {
	var c Credential
	err := sc.Scan(&c.ID, &c.Account, &c.Role, &c.Name, &c.CreatedMS, &c.LastSeen, &c.LastAddr, &c.PublicKey)
	return c, err
}

// CredentialBySecret finds the credential whose secret is secret, or
// ErrNoCredential.
func (s *Store) CredentialBySecret(ctx context.Context, secret string) (Credential, error) {
	if !strings.HasPrefix(secret, credentialPrefix) {
		return Credential{}, ErrNoCredential
	}
	c, err := scanCredential(s.w.QueryRowContext(ctx, `SELECT `+credentialColumns+` FROM credentials WHERE hash = ?`, hashCredential(secret)))
	if errors.Is(err, sql.ErrNoRows) {
		return Credential{}, ErrNoCredential
	}
	if err != nil {
		return Credential{}, fmt.Errorf("look up credential: %w", err)
	}
	return c, nil
}

// Credentials lists the machines and devices of account, machines first,
// then by name.
func (s *Store) Credentials(ctx context.Context, account string) ([]Credential, error) {
	rows, err := s.w.QueryContext(ctx, `SELECT `+credentialColumns+` FROM credentials WHERE account = ? ORDER BY role DESC, name`, account)
	if err != nil {
		return nil, fmt.Errorf("list credentials: %w", err)
	}
	defer rows.Close()
	var out []Credential
	for rows.Next() {
		c, err := scanCredential(rows)
		if err != nil {
			return nil, fmt.Errorf("list credentials: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// FindCredential returns account's credential named name (or with id name).
func (s *Store) FindCredential(ctx context.Context, account, name string) (Credential, error) {
	c, err := scanCredential(s.w.QueryRowContext(ctx, `SELECT `+credentialColumns+` FROM credentials WHERE account = ? AND (name = ? OR id = ?) ORDER BY name = ? DESC LIMIT 1`, account, name, name, name))
	if errors.Is(err, sql.ErrNoRows) {
		return Credential{}, fmt.Errorf("%q: %w", name, ErrNoCredential)
	}
	if err != nil {
		return Credential{}, fmt.Errorf("find %q: %w", name, err)
	}
	return c, nil
}

// DeleteCredential removes a credential of account: its secret stops
// working at once.
func (s *Store) DeleteCredential(ctx context.Context, account, id string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM credentials WHERE account = ? AND id = ?`, account, id)
	if err != nil {
		return fmt.Errorf("revoke %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNoCredential
	}
	// A revoked device keeps no wrapped key on the relay.
	if _, err := s.w.ExecContext(ctx, `DELETE FROM session_keys WHERE device = ?`, id); err != nil {
		return fmt.Errorf("revoke %s: its session keys: %w", id, err)
	}
	return nil
}

// RenameCredential renames a credential of account.
func (s *Store) RenameCredential(ctx context.Context, account, id, name string) (string, error) {
	name = CleanName(name)
	if name == "" {
		return "", errors.New("rename: the new name is empty")
	}
	res, err := s.w.ExecContext(ctx, `UPDATE credentials SET name = ? WHERE account = ? AND id = ?`, name, account, id)
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE") {
			return "", fmt.Errorf("rename: another machine or device is named %q", name)
		}
		return "", fmt.Errorf("rename: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return "", ErrNoCredential
	}
	return name, nil
}

// TouchCredential records when and from where a credential was last used.
func (s *Store) TouchCredential(ctx context.Context, id, addr string, when time.Time) error {
	if _, err := s.w.ExecContext(ctx, `UPDATE credentials SET last_seen_ms = ?, last_addr = ? WHERE id = ?`, when.UnixMilli(), addr, id); err != nil {
		return fmt.Errorf("touch credential: %w", err)
	}
	return nil
}
