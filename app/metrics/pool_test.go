package metrics_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/app/metrics"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store/postgres"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The pool's series follow a real PostgreSQL pool: its size, the first
// query's wait while the pool connects, the connection idle after use and
// held by a query the server has not answered yet.
func TestPoolSeriesFollowTheDatabasePool(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := metrics.New(func(context.Context) (engine.Stats, error) { return engine.Stats{}, nil })
	reg.WatchPool(func() metrics.PoolStats { return metrics.PoolStats(db.PoolStats()) })
	srv := httptest.NewServer(reg.Handler())
	defer srv.Close()

	want := func(what string, ok func(map[string]float64) bool) map[string]float64 {
		t.Helper()
		var got map[string]float64
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if got = scrapePool(t, srv.URL); ok(got) {
				return got
			}
		}
		t.Fatalf("%s: never seen; last scrape %v", what, got)
		return nil
	}
	want("an empty pool of 1", func(m map[string]float64) bool {
		return m["appliance_db_connections_max"] == 1 && m["appliance_db_connections_in_use"] == 0 &&
			m["appliance_db_connection_waits_total"] == 0
	})

	// The first query waits while the pool connects.
	if err := db.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	first := want("the connection idle after the first query", func(m map[string]float64) bool {
		return m["appliance_db_connections_idle"] == 1 && m["appliance_db_connections_in_use"] == 0 &&
			m["appliance_db_connection_waits_total"] == 1 && m["appliance_db_connection_wait_seconds_total"] > 0
	})

	// The server process behind the pool's one connection stops answering:
	// a query holds the connection until it answers again.
	backend := backendPID(ctx, t, pgtest.Shared(t).DSN("postgres"), dsn)
	if err := syscall.Kill(backend, syscall.SIGSTOP); err != nil {
		t.Fatalf("stop backend %d: %v", backend, err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(backend, syscall.SIGCONT)
		}
	}
	defer resume()
	done := make(chan error, 1)
	go func() { done <- db.Ping(ctx) }()
	want("the connection in use", func(m map[string]float64) bool {
		return m["appliance_db_connections_in_use"] == 1 && m["appliance_db_connections_idle"] == 0
	})
	resume()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// That query found the connection idle: no wait.
	want("the connection idle again", func(m map[string]float64) bool {
		return m["appliance_db_connections_in_use"] == 0 && m["appliance_db_connections_idle"] == 1 &&
			m["appliance_db_connection_waits_total"] == 1 &&
			m["appliance_db_connection_wait_seconds_total"] == first["appliance_db_connection_wait_seconds_total"]
	})
}

// backendPID is the server process of the one connection open to the
// database of dsn, found from another connection (admin).
func backendPID(ctx context.Context, t *testing.T, admin, dsn string) int {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'`,
		cfg.Database).Scan(&pid); err != nil {
		t.Fatalf("find the pool's connection: %v", err)
	}
	return pid
}

// scrapePool reads the appliance_db_ series of /metrics.
func scrapePool(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(name, "appliance_db_") {
			continue
		}
		if out[name], err = strconv.ParseFloat(value, 64); err != nil {
			t.Fatalf("scrape: %q: %v", line, err)
		}
	}
	return out
}
