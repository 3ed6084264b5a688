package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store/postgres"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

// A list page by cursor is planned once and then runs on its cached
// generic plan: were it planned on every call (as it was while its LIMIT
// and the cursor's position were parameters the generic plan could not
// see), planning would cost as much as reading the page. The pages are
// near the top of the list, the pages most read, where a plan made for
// the cursor's position looks cheapest beside the generic one.
func TestCursorPagesKeepOneGenericPlan(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Enough jobs that a plan for "a tenth of the table" costs more than
	// planning afresh.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const total = 20_000
	copyJobs(t, conn, total, func(int) string { return "alpha" })
	if _, err := conn.Exec(ctx, "ANALYZE jobs"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		filter engine.JobFilter
		part   string // a piece of the page statement's text
	}{
		{"every job", engine.JobFilter{}, "SELECT rec FROM jobs WHERE (created_ns, id) <"},
		{"one status", engine.JobFilter{Statuses: []string{engine.JobFailed}}, "WHERE status = 'failed' AND (created_ns, id) <"},
		{"two statuses", engine.JobFilter{Statuses: []string{engine.JobFailed, engine.JobCompleted}}, "UNION ALL"},
		{"a workspace", engine.JobFilter{Workspace: "alpha"}, "WHERE workspace = $1 AND (created_ns, id) <"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for page := range 12 {
				mark := newJob(fmt.Sprintf("job-%07d", total-100*page), "", "", total-100*page)
				cur, err := engine.ParseJobCursor(engine.CursorOf(mark))
				if err != nil {
					t.Fatal(err)
				}
				f := tc.filter
				f.Limit, f.Cursor = 50, &cur
				jobs, _, err := db.Jobs(ctx, f)
				if err != nil || len(jobs) != 50 {
					t.Fatalf("page %d: %d jobs, %v", page, len(jobs), err)
				}
			}
			generic, custom, err := postgres.PlanCounts(ctx, db, tc.part)
			if err != nil {
				t.Fatal(err)
			}
			// PostgreSQL tries custom plans for a statement's first five
			// runs, then keeps the generic plan if it costs no more.
			if generic < 6 || custom > 5 {
				t.Fatalf("12 pages were planned %d times generically and %d times custom; want the generic plan from the sixth page on", generic, custom)
			}
		})
	}
}
