package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The schema is versioned SQL, one file per version, named NNNN_what.sql,
// embedded so a binary always carries the schema it was built for.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one version of the schema.
type Migration struct {
	Version int
	Name    string // the file's name
	SQL     string
}

// Migrations returns the binary's schema versions in order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: the name must start with its version, as 0001_", e.Name())
		}
		sql, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(sql)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: versions must run 1, 2, 3... without gaps", m.Name)
		}
	}
	return ms, nil
}

// migrationLock is the advisory lock's key: "appliance" in the ASCII of
// its first eight letters, so it does not collide with another program's.
const migrationLock int64 = 0x6170706c69616e63

// ErrSchemaNewer is returned when the database was migrated by a newer
// binary: this one would not understand its records.
var ErrSchemaNewer = errors.New("the database's schema is newer than this binary")

// Plan is what a migration would do: the database's version and the
// migrations it lacks.
type Plan struct {
	Current int         // the database's schema version (0: empty)
	Latest  int         // the binary's
	Pending []Migration // to apply, in order
}

// PlanMigrations connects with dsn and says which migrations it lacks,
// changing nothing (appliance migrate --dry-run).
func PlanMigrations(ctx context.Context, dsn string) (Plan, error) {
	conn, err := connect(ctx, dsn)
	if err != nil {
		return Plan{}, err
	}
	defer conn.Close(context.Background())
	return plan(ctx, conn)
}

func plan(ctx context.Context, conn *pgx.Conn) (Plan, error) {
	ms, err := Migrations()
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Latest: len(ms)}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('appliance_schema') IS NOT NULL`).Scan(&exists); err != nil {
		return Plan{}, fmt.Errorf("read the schema version: %w", err)
	}
	if exists {
		if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM appliance_schema`).Scan(&p.Current); err != nil {
			return Plan{}, fmt.Errorf("read the schema version: %w", err)
		}
	}
	if p.Current > p.Latest {
		return p, fmt.Errorf("%w: the database is at version %d, this binary knows versions up to %d; run a newer appliance",
			ErrSchemaNewer, p.Current, p.Latest)
	}
	p.Pending = ms[p.Current:]
	return p, nil
}

// migrate brings the database to the binary's schema. It runs on one
// connection of its own, not the pool's, holding a session advisory lock,
// so two replicas starting at once never both migrate: the second waits,
// then finds nothing to do. Each version applies in its own transaction
// with its row in appliance_schema.
func migrate(ctx context.Context, dsn string) (Plan, error) {
	conn, err := connect(ctx, dsn)
	if err != nil {
		return Plan{}, err
	}
	defer conn.Close(context.Background())
	if err := sessionPinned(ctx, conn); err != nil {
		return Plan{}, err
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		return Plan{}, fmt.Errorf("take the migration lock: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, migrationLock) }()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS appliance_schema (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return Plan{}, fmt.Errorf("create the schema table: %w", err)
	}
	p, err := plan(ctx, conn)
	if err != nil {
		return p, err
	}
	for _, m := range p.Pending {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO appliance_schema (version, name) VALUES ($1, $2)`, m.Version, m.Name)
			return err
		})
		if err != nil {
			return p, fmt.Errorf("apply migration %s: %w", m.Name, err)
		}
	}
	return p, nil
}

// ErrTransactionPooling refuses a connection whose session does not last
// between statements, as behind PgBouncer in transaction mode: advisory
// locks (and leases) need a session.
var ErrTransactionPooling = errors.New("the connection's session changes between statements (a transaction-pooling proxy such as PgBouncer in transaction mode?): appliance needs session pooling or a direct connection")

// sessionPinned checks that two statements run in one server session.
func sessionPinned(ctx context.Context, conn *pgx.Conn) error {
	var a, b int32
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&a); err != nil {
		return err
	}
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&b); err != nil {
		return err
	}
	if a != b {
		return ErrTransactionPooling
	}
	return nil
}
