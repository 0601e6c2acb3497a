package relay

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// dialect is the SQL engine under the store. The store's queries are
// written once, with ? placeholders and the SQL the two engines share
// (ON CONFLICT, RETURNING, savepoints); what differs is kept here and in
// the few places that ask which engine runs (schema types, pragmas, row
// locks).
type dialect int

const (
	sqliteSQL   dialect = iota // modernc.org/sqlite: one writer connection, WAL
	postgresSQL                // PostgreSQL through pgx's database/sql driver
)

func (d dialect) String() string {
	if d == postgresSQL {
		return "postgres"
	}
	return "sqlite"
}

// rowLock is what a SELECT of one table ends with to lock the rows it
// reads until the transaction ends: FOR UPDATE on PostgreSQL; nothing on
// SQLite, whose one writer connection runs one transaction at a time.
func (d dialect) rowLock() string {
	if d == postgresSQL {
		return " FOR UPDATE"
	}
	return ""
}

// rowLockSkip is rowLock passing over rows another transaction holds.
func (d dialect) rowLockSkip() string {
	if d == postgresSQL {
		return " FOR UPDATE SKIP LOCKED"
	}
	return ""
}

// rebound caches queries rewritten for PostgreSQL.
var rebound sync.Map // string -> string

// rebind rewrites ? placeholders as $1, $2, … for PostgreSQL. The store's
// queries hold no ? in string literals.
func (d dialect) rebind(q string) string {
	if d != postgresSQL || !strings.Contains(q, "?") {
		return q
	}
	if r, ok := rebound.Load(q); ok {
		return r.(string)
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	r := b.String()
	rebound.Store(q, r)
	return r
}

// sqlDB is a connection pool whose queries are written for either engine.
type sqlDB struct {
	*sql.DB
	d dialect
}

func (x *sqlDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return x.DB.ExecContext(ctx, x.d.rebind(q), args...)
}

func (x *sqlDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return x.DB.QueryContext(ctx, x.d.rebind(q), args...)
}

func (x *sqlDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return x.DB.QueryRowContext(ctx, x.d.rebind(q), args...)
}

func (x *sqlDB) BeginTx(ctx context.Context, opts *sql.TxOptions) (sqlTx, error) {
	t, err := x.DB.BeginTx(ctx, opts)
	return sqlTx{t, x.d}, err
}

// sqlTx is a transaction whose queries are written for either engine.
type sqlTx struct {
	*sql.Tx
	d dialect
}

func (t sqlTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.Tx.ExecContext(ctx, t.d.rebind(q), args...)
}

func (t sqlTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.Tx.QueryContext(ctx, t.d.rebind(q), args...)
}

func (t sqlTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.Tx.QueryRowContext(ctx, t.d.rebind(q), args...)
}

func (t sqlTx) PrepareContext(ctx context.Context, q string) (*sql.Stmt, error) {
	return t.Tx.PrepareContext(ctx, t.d.rebind(q))
}

// txStmt is a query of a transaction: a statement the store prepared once
// (SQLite's one writer connection never prepares it again), or the query
// as text (PostgreSQL: pgx prepares and keeps it per connection itself;
// preparing it in the transaction would prepare and deallocate it at each).
type txStmt struct {
	st *sql.Stmt // nil: q run as text in tx
	tx sqlTx
	q  string
}

func (t txStmt) QueryContext(ctx context.Context, args ...any) (*sql.Rows, error) {
	if t.st != nil {
		return t.st.QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, t.q, args...)
}

func (t txStmt) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	if t.st != nil {
		return t.st.ExecContext(ctx, args...)
	}
	return t.tx.ExecContext(ctx, t.q, args...)
}

func (t txStmt) QueryRowContext(ctx context.Context, args ...any) *sql.Row {
	if t.st != nil {
		return t.st.QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, t.q, args...)
}

// stmt is q in tx: the statement prepareHot prepared, if it did.
func (s *Store) stmt(ctx context.Context, tx sqlTx, q string) txStmt {
	if v, ok := s.stmts.Load(q); ok {
		return txStmt{st: tx.Tx.StmtContext(ctx, v.(*sql.Stmt))}
	}
	return txStmt{tx: tx, q: q}
}

// prepareHot prepares queries on the writer, for stmt. On SQLite it must
// run while no transaction holds the one writer connection (at open).
func (s *Store) prepareHot(ctx context.Context, queries ...string) error {
	for _, q := range queries {
		st, err := s.w.DB.PrepareContext(ctx, s.w.d.rebind(q))
		if err != nil {
			return fmt.Errorf("prepare %s: %w", firstLine(q), err)
		}
		s.stmts.Store(q, st)
	}
	return nil
}

// closeStmts closes the statements prepareHot kept.
func (s *Store) closeStmts() {
	s.stmts.Range(func(q, v any) bool {
		v.(*sql.Stmt).Close()
		s.stmts.Delete(q)
		return true
	})
}
