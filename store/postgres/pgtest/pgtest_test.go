package pgtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/appliance-sh/appliance/store/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// Each test gets its own empty database on the shared cluster, over its
// socket, and the cluster answers on loopback TCP too.
func TestDatabasesAreSeparateAndReachable(t *testing.T) {
	ctx := context.Background()
	a, b := pgtest.DSN(t), pgtest.DSN(t)
	if a == b {
		t.Fatalf("two tests share database %s", a)
	}
	conn, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE x (n int)"); err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	var n int
	if err := other.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'x'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the second database sees the first one's table: n=%d err=%v", n, err)
	}
	c := pgtest.Shared(t)
	tcp, err := pgx.Connect(ctx, c.TCPDSN("postgres"))
	if err != nil {
		t.Fatalf("loopback TCP: %v", err)
	}
	tcp.Close(ctx)
}

// Restart breaks the sessions open on a cluster of its own and brings it
// back on the same port with what was committed.
func TestRestartKeepsCommittedDataAndPort(t *testing.T) {
	ctx := context.Background()
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		pgtest.Unavailable(t, err)
	}
	t.Cleanup(func() { _ = c.Stop() }) // after the database's drop
	dsn := c.Database(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE x (n int); INSERT INTO x VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	port := c.Port
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("a session opened before the restart still answers")
	}
	again, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect after the restart: %v", err)
	}
	defer again.Close(ctx)
	var n int
	if err := again.QueryRow(ctx, "SELECT n FROM x").Scan(&n); err != nil || n != 7 || c.Port != port {
		t.Fatalf("after the restart: n=%d err=%v port %d (was %d)", n, err, c.Port, port)
	}
}
