package failover_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

// TestDatabaseRestartUnderARunningPair restarts PostgreSQL (a fast
// shutdown, then pg_ctl start on the same data and port) while jobs are
// submitted to both replicas: both replicas wait it out (neither exits),
// one leads again and the other follows it, and every job acknowledged
// before, during or after the restart exists once and ends completed.
func TestDatabaseRestartUnderARunningPair(t *testing.T) {
	skipShort(t)
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		pgtest.Unavailable(t, err)
	}
	t.Cleanup(func() { _ = c.Stop() }) // after the database's drop
	steps := filepath.Join(t.TempDir(), "runs")
	p := newPairOn(t, c.Database(t), "tasks:\n  work:\n    flow:\n"+stepScript("only", "", steps, "0.02"))
	a := p.start("a", 2)
	waitFor(t, 10*time.Second, "replica a to lead", a.leads)
	b := p.start("b", 2)
	waitFor(t, 5*time.Second, "replica b to follow a", func() bool {
		st, err := b.status()
		return err == nil && !st.Leading && st.Leader == a.url
	})

	const jobs = 80
	subs := submit(t, "work", jobs, 4, 25*time.Millisecond, a, b)
	waitFor(t, 20*time.Second, "20 jobs acknowledged", func() bool { return subs.count() >= 20 })
	// The test's own connection dies with the restart: a new one after.
	p.connect()
	_ = p.db.Close(context.Background())
	p.db = nil
	restartedAt := time.Now()
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("the database restarted in %s", time.Since(restartedAt).Round(time.Millisecond))
	var leader, follower *replica
	waitFor(t, lease+renew+10*time.Second, "one replica to lead again, the other to follow it", func() bool {
		sa, errA := a.status()
		sb, errB := b.status()
		switch {
		case errA != nil || errB != nil:
			return false
		case sa.Leading && !sb.Leading && sb.Leader == a.url:
			leader, follower = a, b
		case sb.Leading && !sa.Leading && sa.Leader == b.url:
			leader, follower = b, a
		default:
			return false
		}
		return true
	})
	t.Logf("%s leads again %s after the restart began, %s follows", leader.name, time.Since(restartedAt).Round(time.Millisecond), follower.name)
	acked := subs.wait(t)
	for _, r := range []*replica{a, b} {
		if r.cmd.ProcessState != nil {
			t.Fatalf("replica %s exited: %s", r.name, r.cmd.ProcessState)
		}
	}
	for _, id := range acked {
		if j := follower.waitEnded(t, id, 30*time.Second); j.Status != "completed" {
			t.Errorf("job %s ended %s, want completed", id, j.Status)
		}
	}
	var n int
	if err := p.connect().QueryRow(context.Background(), `SELECT count(*) FROM jobs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != jobs || len(acked) != jobs {
		t.Errorf("%d jobs in the database, %d acknowledged, want %d: one per Idempotency-Key", n, len(acked), jobs)
	}
}
