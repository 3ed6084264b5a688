// Package postgres keeps appliance's whole state in PostgreSQL, through
// pgx and its pool (no ORM): the same records, the same contract, as the
// bbolt store, for a team whose service must outlive its machine
// (replication, point-in-time backups, two servers on one database).
//
// The schema is versioned SQL embedded in the binary (migrations/),
// applied at Open under an advisory lock.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"github.com/appliance-sh/appliance/audit"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultMaxConns is the pool's size when the config leaves it unset.
const DefaultMaxConns = 10

// Config opens a DB.
type Config struct {
	DSN      string
	MaxConns int // default DefaultMaxConns
	// IdleInTransaction ends a session left idle inside a transaction
	// this long (idle_in_transaction_session_timeout; 0: the server's
	// setting). Two replicas set it below the lease, so a leader stopped
	// mid-transaction cannot hold the lease row and block a takeover.
	IdleInTransaction time.Duration
}

// DB is appliance's state in one PostgreSQL database.
type DB struct {
	pool *pgxpool.Pool
	dsn  string
	// fence is nil for a single server; with two, see fence.go.
	fence atomic.Pointer[fenceState]
	// auditKey signs the audit chain (audit.go).
	auditKey audit.Key
	// lostAt is when a connection of the pool was last found dead (Unix
	// nanoseconds): for a while after, every connection is pinged as it
	// is taken from the pool, so the idle ones a database restart or a
	// cut network killed are dropped there, not handed to a read.
	lostAt atomic.Int64
}

// recentLoss is how long after a dead connection the pool checks those it
// hands out; pgxpool's own check only covers connections idle over 1 s.
const recentLoss = 10 * time.Second

// watchConnections makes the pool check its connections after a loss.
func (db *DB) watchConnections(pc *pgxpool.Config) {
	pc.AfterRelease = func(c *pgx.Conn) bool {
		if c.IsClosed() {
			db.noteLost()
			return false
		}
		return true
	}
	pc.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
		return p.IdleDuration > time.Second || time.Since(time.Unix(0, db.lostAt.Load())) < recentLoss
	}
}

// noteLost notes that the pool held a dead connection.
func (db *DB) noteLost() { db.lostAt.Store(time.Now().UnixNano()) }

// Open connects, checks the server can be used, applies the migrations
// the database lacks and returns the store. Its errors name the server
// and never its password.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, dsnError(cfg.DSN, err)
	}
	pc.MaxConns = int32(cfg.MaxConns)
	if pc.MaxConns <= 0 {
		pc.MaxConns = DefaultMaxConns
	}
	if cfg.IdleInTransaction > 0 {
		pc.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] =
			strconv.FormatInt(max(1, cfg.IdleInTransaction.Milliseconds()), 10)
	}
	if _, err := migrate(ctx, cfg.DSN); err != nil {
		return nil, describe(pc.ConnConfig, err)
	}
	db := &DB{dsn: cfg.DSN}
	db.watchConnections(pc)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, describe(pc.ConnConfig, err)
	}
	db.pool = pool
	return db, nil
}

// Close closes the pool.
func (db *DB) Close() error {
	db.pool.Close()
	return nil
}

// Ping takes a connection from the pool and makes a round trip to the
// server with it: that the database answers through the pool itself.
func (db *DB) Ping(ctx context.Context) error { return db.pool.Ping(ctx) }

// PoolStats are the pool's figures for /metrics.
type PoolStats struct {
	InUse, Idle, Max int32
	Waits            int64         // acquisitions that had to wait for a connection
	WaitTime         time.Duration // their total wait
}

// PoolStats reads the pool's figures.
func (db *DB) PoolStats() PoolStats {
	s := db.pool.Stat()
	return PoolStats{InUse: s.AcquiredConns(), Idle: s.IdleConns(), Max: s.MaxConns(),
		Waits: s.EmptyAcquireCount(), WaitTime: s.EmptyAcquireWaitTime()}
}

// connect opens one connection outside the pool (the migration lock's).
func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, dsnError(dsn, err)
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, describe(cc, err)
	}
	return conn, nil
}

// dsnError says a DSN does not parse, without repeating it: it may hold a
// password.
func dsnError(dsn string, err error) error {
	msg := err.Error()
	if u := passwordOf(dsn); u != "" {
		msg = strings.ReplaceAll(msg, u, "xxxxx")
	}
	return fmt.Errorf("storage.dsn is not a valid PostgreSQL connection string: %s", msg)
}

// describe names the server an error came from (host, port, database,
// user), never the password.
func describe(cc *pgx.ConnConfig, err error) error {
	var named *namedError
	if errors.As(err, &named) {
		return err // named already, by connect
	}
	host := cc.Host
	if !strings.HasPrefix(host, "/") {
		host = net.JoinHostPort(host, strconv.Itoa(int(cc.Port)))
	}
	where := fmt.Sprintf("PostgreSQL at %s (database %q, user %q)", host, cc.Database, cc.User)
	if cc.Password != "" && strings.Contains(err.Error(), cc.Password) {
		return &namedError{fmt.Errorf("%s: %s", where, strings.ReplaceAll(err.Error(), cc.Password, "xxxxx"))}
	}
	return &namedError{fmt.Errorf("%s: %w", where, err)}
}

// namedError is an error describe has named the server in.
type namedError struct{ err error }

func (e *namedError) Error() string { return e.err.Error() }
func (e *namedError) Unwrap() error { return e.err }

// passwordOf finds the password in a DSN that failed to parse, to redact it.
func passwordOf(dsn string) string {
	if _, rest, ok := strings.Cut(dsn, "://"); ok {
		userinfo, _, _ := strings.Cut(rest, "@")
		if _, pw, ok := strings.Cut(userinfo, ":"); ok && strings.Contains(rest, "@") {
			return pw
		}
	}
	for _, f := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(f, "password="); ok {
			return strings.Trim(v, `'`)
		}
	}
	return ""
}
