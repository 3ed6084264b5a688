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
