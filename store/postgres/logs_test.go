package postgres_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/appliance-sh/appliance/engine"

	"github.com/appliance-sh/appliance/store"
	"github.com/appliance-sh/appliance/store/logtest"
	"github.com/appliance-sh/appliance/store/postgres"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

// logDB is one database holding job logs: each Open is a new connection
// pool and a new Logs on it, as a restarted server or another replica has.
type logDB struct{ dsn string }

func (d logDB) Open(t *testing.T) store.LogBackend {
	t.Helper()
	l := postgres.OpenLogs(open(t, d.dsn))
	t.Cleanup(func() { l.Close() })
	return l
}

func (d logDB) SetWritten(t *testing.T, jobID string, at time.Time) {
	t.Helper()
	db := open(t, d.dsn)
	if err := postgres.SetLogWritten(context.Background(), db, jobID, at); err != nil {
		t.Fatal(err)
	}
}

func TestLogsPassTheLogSuite(t *testing.T) {
	logtest.Run(t, logtest.Config{
		New:                func(t *testing.T) logtest.Storage { return logDB{pgtest.DSN(t)} },
		KeepsDroppedCounts: true,
	})
}

// When the writer of a job moves to another process (a failover), the
// old one's next append finds its position stale, reads it again and
// lands after the new writer's lines.
func TestALogWriterWhoseJobWasWrittenElsewhereContinuesAfterIt(t *testing.T) {
	s := logDB{pgtest.DSN(t)}
	a, b := s.Open(t), s.Open(t)
	for i, l := range []store.LogBackend{a, b, a, b, a} {
		if err := l.Append("j", []engine.LogLine{{Stream: "stdout", Step: "s", Line: fmt.Sprint(i)}}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	var out strings.Builder
	page, err := b.ReadLog(context.Background(), "j", engine.LogQuery{Step: "s"}, &out)
	if err != nil || page.Lines != 5 {
		t.Fatalf("ReadLog = %+v, %v", page, err)
	}
	for i, raw := range strings.SplitAfter(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if !strings.Contains(raw, fmt.Sprintf(`"line":"%d"`, i)) {
			t.Fatalf("line %d = %s", i, raw)
		}
	}
	if size, ok, err := a.Stored("j"); err != nil || !ok || size != int64(out.Len()) {
		t.Errorf("Stored = %d, %v, %v; want %d bytes", size, ok, err, out.Len())
	}
}

// The archive works over the database's logs as over the files: to S3.
func TestLogsInTheDatabaseAreArchivedToS3AndReadBack(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("logs"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	archive, err := store.NewS3Archive(store.ArchiveConfig{Type: "s3", Bucket: "logs", Region: "us-east-1", Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	logtest.ArchiveRoundTrip(t, logDB{pgtest.DSN(t)}.Open(t), archive)
}

// Log retention deletes old logs from the database, keeping those the
// archive does not hold yet.
func TestLogRetentionDeletesOldLogsFromTheDatabase(t *testing.T) {
	ctx := context.Background()
	jobsDB, err := store.Open(filepath.Join(t.TempDir(), "appliance.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer jobsDB.Close()
	s := logDB{pgtest.DSN(t)}
	logs := s.Open(t)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ended := now.Add(-48 * time.Hour)
	var jobs []*engine.Job
	for _, id := range []string{"old", "live", "recent"} {
		j := &engine.Job{ID: id, Workspace: "ops", TaskName: "t", AccessPath: "t", Mode: "distributed",
			Status: engine.JobCompleted, SourceType: engine.SourceAPI, CreatedAt: ended, CompletedAt: &ended}
		switch id {
		case "live":
			j.Status, j.CompletedAt = engine.JobRunning, nil
		case "recent":
			j.CompletedAt = &now
		}
		jobs = append(jobs, j)
		if err := logs.Append(id, []engine.LogLine{{Stream: "stdout", Step: "s", Line: "hello " + id}}); err != nil {
			t.Fatal(err)
		}
		written := ended
		if id == "recent" {
			written = now
		}
		s.SetWritten(t, id, written)
	}
	if err := jobsDB.Commit(ctx, &engine.Batch{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	sw := store.NewSweeper(store.SweeperConfig{DB: jobsDB, Logs: logs, Retention: store.Retention{Logs: 24 * time.Hour},
		Now: func() time.Time { return now }})
	n, err := sw.Sweep(ctx)
	if err != nil || n.Logs != 1 {
		t.Fatalf("Sweep = %+v, %v; want one log deleted", n, err)
	}
	for id, want := range map[string]bool{"old": false, "live": true, "recent": true} {
		if _, ok, err := logs.Stored(id); err != nil || ok != want {
			t.Errorf("log of %s stored = %v, %v; want %v", id, ok, err, want)
		}
	}
}
