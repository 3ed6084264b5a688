package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store/postgres"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

const (
	testLease = 1500 * time.Millisecond
	testRenew = 300 * time.Millisecond
)

// replica is one server's store and elector on a shared database.
type replica struct {
	db     *postgres.DB
	el     *postgres.Elector
	url    string
	cancel context.CancelFunc
	done   chan struct{}
}

func startReplica(t *testing.T, dsn, name string) *replica {
	t.Helper()
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, IdleInTransaction: testLease / 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	r := &replica{db: db, url: "http://" + name + ".test", done: make(chan struct{})}
	r.el, err = db.NewElector(postgres.ElectorConfig{Holder: name, AdvertiseURL: r.url, Lease: testLease, Renew: testRenew})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { defer close(r.done); r.el.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

// stop ends the elector without giving the lease up: to the other
// replica, a leader that stopped renewing (a crash, a split).
func (r *replica) stop() {
	r.cancel()
	<-r.done
}

// waitFor polls until cond holds, failing the test at the deadline.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func leaderOf(rs ...*replica) (*replica, *replica) {
	if rs[0].el.Current().Leader {
		return rs[0], rs[1]
	}
	return rs[1], rs[0]
}

func commitJob(db *postgres.DB, id string) error {
	return db.Commit(context.Background(), &engine.Batch{Jobs: []*engine.Job{newJob(id, "ws", "task", 1)}})
}

// Two candidates on one database: exactly one leads, the other knows
// where, and only the leader's writes are accepted.
func TestOneOfTwoCandidatesLeads(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := startReplica(t, dsn, "a"), startReplica(t, dsn, "b")
	waitFor(t, 5*time.Second, "one replica leads and the other follows it", func() bool {
		la, lb := a.el.Current(), b.el.Current()
		return la.Leader != lb.Leader && (la.LeaderURL != "" && la.LeaderURL == lb.LeaderURL)
	})
	leader, follower := leaderOf(a, b)
	if got := follower.el.Current().LeaderURL; got != leader.url {
		t.Fatalf("follower says the leader is %q, want %q", got, leader.url)
	}
	// Across several renewals the leadership stays put, never doubled.
	epoch := leader.el.Current().Epoch
	for end := time.Now().Add(4 * testRenew); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if a.el.Current().Leader && b.el.Current().Leader {
			t.Fatal("both replicas lead")
		}
	}
	if l := leader.el.Current(); !l.Leader || l.Epoch != epoch {
		t.Fatalf("the leader's lease changed while it renewed: %+v, led at epoch %d", l, epoch)
	}
	if err := commitJob(leader.db, "by-leader"); err != nil {
		t.Fatalf("leader's write: %v", err)
	}
	if err := commitJob(follower.db, "by-follower"); !errors.Is(err, engine.ErrNotLeader) {
		t.Fatalf("follower's write: %v, want ErrNotLeader", err)
	}
	if _, err := leader.db.Job(context.Background(), "by-follower"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the follower's refused job is stored: %v", err)
	}
}

// A leader that stops renewing loses the lease: the other replica takes
// it with the next epoch within lease + renew, and the old one, forced to
// write at its old epoch anyway, is refused by the database.
func TestTakeoverAfterLeaderStopsRenewing(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := startReplica(t, dsn, "a"), startReplica(t, dsn, "b")
	waitFor(t, 5*time.Second, "a leader", func() bool { return a.el.Current().Leader || b.el.Current().Leader })
	old, next := leaderOf(a, b)
	epoch := old.el.Current().Epoch

	stopped := time.Now()
	old.stop()
	if old.el.Current().Leader {
		t.Fatal("a stopped elector still leads")
	}
	if err := commitJob(old.db, "after-stop"); !errors.Is(err, engine.ErrNotLeader) {
		t.Fatalf("write after stepping down: %v, want ErrNotLeader", err)
	}
	waitFor(t, testLease+testRenew+time.Second, "the other replica takes over", func() bool { return next.el.Current().Leader })
	took := time.Since(stopped)
	if got := next.el.Current().Epoch; got != epoch+1 {
		t.Fatalf("new leader's epoch %d, want %d", got, epoch+1)
	}
	if took > testLease+testRenew+200*time.Millisecond {
		t.Fatalf("takeover took %s, more than lease + renew (%s)", took, testLease+testRenew)
	}
	t.Logf("takeover %s after the leader stopped renewing (lease %s, renew %s)", took.Round(time.Millisecond), testLease, testRenew)

	// The forced write: the deposed replica believes it still leads at
	// its old epoch; the fence in the database refuses, all of the batch.
	old.db.ForceFence(epoch, time.Now().Add(time.Hour))
	err := old.db.Commit(context.Background(), &engine.Batch{
		Jobs:  []*engine.Job{newJob("stale", "ws", "task", 2)},
		Steps: []*engine.Step{newStep("stale", "s", 0)},
	})
	if !errors.Is(err, engine.ErrNotLeader) {
		t.Fatalf("stale-epoch write: %v, want ErrNotLeader", err)
	}
	if _, err := next.db.Job(context.Background(), "stale"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the refused job is stored: %v", err)
	}
	// The same goes for the accounts' writes.
	key := &accounts.APIKey{Hash: "h", Prefix: "p", Name: "k", UserID: "u", CreatedAt: time.Now()}
	if err := old.db.CreateAPIKey(context.Background(), key); !errors.Is(err, engine.ErrNotLeader) {
		t.Fatalf("stale-epoch account write: %v, want ErrNotLeader", err)
	}
	// And a log append: a deposed leader's lines never join the new one's.
	staleLogs := postgres.OpenLogs(old.db)
	defer staleLogs.Close()
	if err := staleLogs.Append("stale-log", []engine.LogLine{{TS: time.Now(), Stream: "stdout", Step: "s", Line: "late"}}); !errors.Is(err, engine.ErrNotLeader) {
		t.Fatalf("stale-epoch log append: %v, want ErrNotLeader", err)
	}
	if err := commitJob(next.db, "by-new-leader"); err != nil {
		t.Fatalf("new leader's write: %v", err)
	}
}

// The lease's times are the database's: its expiry is now() + lease on the
// server's clock, so a replica whose clock is off by minutes takes and
// keeps the lease exactly as one whose clock is right.
func TestLeaseTimesComeFromTheDatabaseClock(t *testing.T) {
	dsn := pgtest.DSN(t)
	a := startReplica(t, dsn, "a")
	waitFor(t, 5*time.Second, "a leads", func() bool { return a.el.Current().Leader })
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var left time.Duration
	if err := conn.QueryRow(context.Background(),
		`SELECT (extract(epoch FROM expires_at - now()) * 1e6)::bigint FROM leader_lease`).Scan((*int64)(&left)); err != nil {
		t.Fatal(err)
	}
	left *= time.Microsecond
	if left <= 0 || left > testLease {
		t.Fatalf("lease runs %s more on the database's clock, want within (0, %s]", left, testLease)
	}
	// Move the lease's expiry into the past on the database's clock: the
	// holder's own clock says nothing of it, and its next renewal finds
	// the lease gone and steps down; a second replica then takes it.
	if _, err := conn.Exec(context.Background(), `UPDATE leader_lease SET expires_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*testRenew+time.Second, "the holder steps down or re-takes at a new epoch", func() bool {
		l := a.el.Current()
		return !l.Leader || l.Epoch > 1
	})
}

// A leader stopped in the middle of a write transaction holds the lease
// row FOR SHARE; idle_in_transaction_session_timeout ends its session, so
// the takeover waits at most that long past the lease.
func TestStoppedTransactionCannotBlockTakeover(t *testing.T) {
	dsn := pgtest.DSN(t)
	a := startReplica(t, dsn, "a")
	waitFor(t, 5*time.Second, "a leads", func() bool { return a.el.Current().Leader })
	epoch := a.el.Current().Epoch

	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	idle := testLease / 2
	if _, err := conn.Exec(context.Background(), fmt.Sprintf("SET idle_in_transaction_session_timeout = %d", idle.Milliseconds())); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), `SELECT appliance_fence($1)`, epoch); err != nil {
		t.Fatal(err)
	}
	// The leader "stops": no more renewals, its transaction left open.
	a.stop()
	stopped := time.Now()
	b := startReplica(t, dsn, "b")
	waitFor(t, testLease+idle+testRenew+2*time.Second, "b takes over", func() bool { return b.el.Current().Leader })
	if took := time.Since(stopped); took > testLease+idle+testRenew+500*time.Millisecond {
		t.Fatalf("takeover took %s", took)
	}
	if got := b.el.Current().Epoch; got != epoch+1 {
		t.Fatalf("epoch %d, want %d", got, epoch+1)
	}
	if err := tx.Commit(context.Background()); err == nil {
		t.Fatal("the stopped leader's transaction committed after the takeover")
	}
}
