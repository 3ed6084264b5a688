package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// onPostgres is a config tweak keeping a test server's whole state (jobs,
// steps, triggers, event marks, logs, accounts) in a new, empty database of
// the tests' PostgreSQL cluster. Without PostgreSQL the test is skipped,
// saying why (failed under APPLIANCE_REQUIRE_POSTGRES=1).
func onPostgres(t testing.TB) func(*config.Server) {
	t.Helper()
	return postgresStorage(pgtest.DSN(t))
}

func postgresStorage(dsn string) func(*config.Server) {
	return func(c *config.Server) {
		c.Storage = config.Storage{Type: config.StoragePostgres, DSN: dsn}
	}
}

// TestJourneysOnPostgres runs the journeys of the bbolt tests, unchanged,
// on a server whose state is in PostgreSQL: the same contract, two stores.
func TestJourneysOnPostgres(t *testing.T) {
	for _, j := range []struct {
		name string
		run  func(*testing.T, ...func(*config.Server))
	}{
		{"execute, outputs and logs", helloWorldPassesOutput},
		{"approvals", approvalOverTheAPI},
		{"cron trigger and sync webhook", schedulerAndWebhookRunRealJobs},
		{"event source", func(t *testing.T, storage ...func(*config.Server)) {
			eventSourceMakesOneJobPerEvent(t, 100, storage...)
		}},
		{"log stream over WebSocket from a remote worker", logStreamShowsARemoteStepsLinesLive},
		{"a push repeated to a restarted server", repeatedPushToARestartedServerWritesNoLineTwice},
		{"re-run from failed", rerunFromFailedReusesTheCompletedSteps},
		{"retention", retentionSweepsEndedJobs},
		{"metrics with the pool's", metricsMoveAsJobsRun},
	} {
		t.Run(j.name, func(t *testing.T) { j.run(t, onPostgres(t)) })
	}
}

// TestKillNineOnPostgresLosesNoAcknowledgedJob kills a real `appliance
// serve` on PostgreSQL with SIGKILL mid-burst of execute calls: after a
// restart every job whose creation was answered with its id is there and
// ends, as on bbolt.
func TestKillNineOnPostgresLosesNoAcknowledgedJob(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := filepath.Join(t.TempDir(), "server-config.yaml")
	// A double-quoted YAML scalar takes Go's quoting of an ASCII string.
	body := "storage:\n  type: postgres\n  dsn: " + strconv.Quote(dsn) + "\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	acked := killNineLosesNoAcknowledgedJob(t, "--config", cfg)

	// They are the database's rows, not a bbolt file's records.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	waitUntil(t, "every acknowledged job to be an ended row of the database", func() bool {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM jobs WHERE id = ANY($1) AND NOT active", acked).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == len(acked)
	})
}
