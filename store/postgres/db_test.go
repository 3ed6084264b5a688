package postgres_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store/postgres"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// open opens a store on a new database, closed when the test ends.
func open(t testing.TB, dsn string) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Replicas starting at once migrate once: the advisory lock makes the
// others wait and then find nothing to do.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	dsn := pgtest.DSN(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn})
			if err == nil {
				_ = db.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	ms, err := postgres.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rows, max int
	if err := conn.QueryRow(context.Background(), `SELECT count(*), max(version) FROM appliance_schema`).Scan(&rows, &max); err != nil {
		t.Fatal(err)
	}
	if rows != len(ms) || max != len(ms) {
		t.Fatalf("appliance_schema has %d rows up to version %d, want %d", rows, max, len(ms))
	}
	p, err := postgres.PlanMigrations(context.Background(), dsn)
	if err != nil || len(p.Pending) != 0 || p.Current != len(ms) {
		t.Fatalf("plan after migrating: %+v, %v", p, err)
	}
}

// A dry run on an empty database lists every migration and applies none.
func TestPlanChangesNothing(t *testing.T) {
	dsn := pgtest.DSN(t)
	p, err := postgres.PlanMigrations(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := postgres.Migrations()
	if p.Current != 0 || p.Latest != len(ms) || len(p.Pending) != len(ms) {
		t.Fatalf("plan on an empty database: %+v", p)
	}
	again, err := postgres.PlanMigrations(context.Background(), dsn)
	if err != nil || len(again.Pending) != len(ms) {
		t.Fatalf("a dry run applied something: %+v, %v", again, err)
	}
}

// A database a newer binary migrated is refused, naming both versions.
func TestNewerSchemaIsRefused(t *testing.T) {
	dsn := pgtest.DSN(t)
	open(t, dsn).Close()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `INSERT INTO appliance_schema (version, name) VALUES (999, '0999_future.sql')`); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(context.Background(), postgres.Config{DSN: dsn})
	ms, _ := postgres.Migrations()
	if !errors.Is(err, postgres.ErrSchemaNewer) || !strings.Contains(err.Error(), "999") ||
		!strings.Contains(err.Error(), "up to "+strconv.Itoa(len(ms))) {
		t.Fatalf("open of a newer database: %v", err)
	}
}

// A server that cannot be reached is named with the cause, and the
// password never appears.
func TestUnreachableServerIsNamedWithoutThePassword(t *testing.T) {
	const secret = "s3cr3t-pw"
	for _, dsn := range []string{
		"postgres://bob:" + secret + "@127.0.0.1:1/app?sslmode=disable&connect_timeout=5",
		"host=127.0.0.1 port=1 user=bob password=" + secret + " dbname=app sslmode=disable connect_timeout=5",
		"postgres://bob:" + secret + "@127.0.0.1:notaport/app",
	} {
		_, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn})
		if err == nil {
			t.Fatalf("%q opened", dsn)
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("the error shows the password: %v", err)
		}
		if !strings.Contains(err.Error(), "127.0.0.1") && !strings.Contains(err.Error(), "not a valid") {
			t.Fatalf("the error does not name the server: %v", err)
		}
	}
}

// A database that went away is ErrDatabaseUnavailable (the API answers
// 503 with Retry-After, and clients retry), not a server fault.
func TestDatabaseGoneIsUnavailable(t *testing.T) {
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		pgtest.Unavailable(t, err)
	}
	name, err := c.CreateDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: c.DSN(name)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.JobByIdempotencyKey(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	// Every read the API serves says so, not only the key's lookup: the
	// job, its steps, a list page.
	ctx := context.Background()
	_, keyErr := db.JobByIdempotencyKey(ctx, "k")
	_, jobErr := db.Job(ctx, "j")
	_, stepsErr := db.Steps(ctx, "j")
	_, _, listErr := db.Jobs(ctx, engine.JobFilter{Limit: 10})
	// And a commit: a write cut by a restart is a 503 too, never a 500.
	commitErr := db.Commit(ctx, &engine.Batch{Jobs: []*engine.Job{{ID: "j", Workspace: "ws", TaskName: "t", AccessPath: "t", Status: engine.JobPending, SourceType: engine.SourceAPI}}})
	for what, err := range map[string]error{"idempotency key": keyErr, "job": jobErr, "steps": stepsErr, "list": listErr, "commit": commitErr} {
		if !errors.Is(err, engine.ErrDatabaseUnavailable) || !errors.Is(err, engine.ErrUnavailable) {
			t.Errorf("%s with the database stopped: %v, want ErrDatabaseUnavailable", what, err)
		}
	}
}
