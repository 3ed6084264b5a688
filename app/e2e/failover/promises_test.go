package failover_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
)

// failover kills the leader a with SIGKILL and waits until b leads; it
// returns when b took the lease, by the database's clock (the write log's
// record of the lease's new epoch: recordWrites must be on).
func (p *pair) failover(a, b *replica) time.Time {
	p.t.Helper()
	before := p.epoch()
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatal(err)
	}
	_ = a.cmd.Wait()
	waitFor(p.t, lease+renew+5*time.Second, "replica b to lead", b.leads)
	var at time.Time
	if err := p.connect().QueryRow(context.Background(),
		`SELECT min(at) FROM write_log WHERE tbl = 'leader_lease' AND epoch > $1`, before).Scan(&at); err != nil {
		p.t.Fatalf("the takeover's time: %v", err)
	}
	return at
}

// fire is a scheduler trigger's fire as the database recorded it.
type fire struct {
	writer string
	at     time.Time // the fire time the scheduler recorded
}

// recordFires logs every write of a trigger's last fire with the
// transaction that made it, and every job inserted with its transaction:
// a fire is a write whose transaction created a job (the scheduler also
// writes a new trigger's base time, with no job).
func (p *pair) recordFires() {
	p.t.Helper()
	_, err := p.connect().Exec(context.Background(), `
CREATE TABLE fire_log (writer text NOT NULL, fired_at text NOT NULL, tx bigint NOT NULL);
CREATE TABLE job_log (tx bigint NOT NULL, task text NOT NULL);
CREATE FUNCTION log_fire() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fire_log VALUES (current_setting('application_name'), NEW.fired_at, txid_current());
    RETURN NULL;
END $$;
CREATE FUNCTION log_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_log VALUES (txid_current(), NEW.task_name);
    RETURN NULL;
END $$;
CREATE TRIGGER log_fire AFTER INSERT OR UPDATE ON trigger_fires FOR EACH ROW EXECUTE FUNCTION log_fire();
CREATE TRIGGER log_job AFTER INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION log_job();
`)
	if err != nil {
		p.t.Fatal(err)
	}
}

// fires reads the fires of task's trigger in time order, and the number
// of task's jobs made meanwhile, in one snapshot, both since recordFires.
func (p *pair) fires(task string) ([]fire, int) {
	p.t.Helper()
	ctx := context.Background()
	tx, err := p.connect().Begin(ctx)
	if err != nil {
		p.t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`); err != nil {
		p.t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `SELECT f.writer, f.fired_at FROM fire_log f
		WHERE EXISTS (SELECT 1 FROM job_log j WHERE j.tx = f.tx AND j.task = $1)`, task)
	if err != nil {
		p.t.Fatal(err)
	}
	var fires []fire
	for rows.Next() {
		var f fire
		var at string
		if err := rows.Scan(&f.writer, &at); err != nil {
			p.t.Fatal(err)
		}
		if f.at, err = time.Parse(time.RFC3339Nano, at); err != nil {
			p.t.Fatalf("fire time %q: %v", at, err)
		}
		fires = append(fires, f)
	}
	if err := rows.Err(); err != nil {
		p.t.Fatal(err)
	}
	// The jobs made since the recording began, as the fires are: a fire
	// just before it (the trigger's first, when the leader has just
	// started) has its job but no record.
	var jobs int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM job_log WHERE task = $1`, task).Scan(&jobs); err != nil {
		p.t.Fatal(err)
	}
	sort.Slice(fires, func(i, j int) bool { return fires[i].at.Before(fires[j].at) })
	return fires, jobs
}

// TestCronAcrossAKillNineFiresEachSlotOnce runs a trigger every second
// across a kill -9 of the leader. The scheduler's promise after a restart
// (app/scheduler) holds across a failover: the new leader schedules the
// trigger after its last recorded fire, so the slots missed while no one
// led fire once, at once, at the takeover (one fire, its time the
// takeover's, not one per missed slot), and the schedule goes on from
// there; no slot fires twice, and each fire is one job.
func TestCronAcrossAKillNineFiresEachSlotOnce(t *testing.T) {
	p := newPair(t, `tasks:
  tick:
    flow:
      t:
        type: script
        script: "true"
triggers:
  every-second:
    type: scheduler
    cron: "*/1 * * * * *"
    task: tick
`)
	a := p.start("a", 1)
	waitFor(t, 10*time.Second, "replica a to lead", a.leads)
	p.recordWrites()
	p.recordFires()
	b := p.start("b", 1)
	waitFor(t, 10*time.Second, "two fires on a", func() bool { f, _ := p.fires("tick"); return len(f) >= 2 })
	takeover := p.failover(a, b)
	waitFor(t, 10*time.Second, "two fires on b", func() bool {
		n := 0
		f, _ := p.fires("tick")
		for _, x := range f {
			if x.writer == "b" {
				n++
			}
		}
		return n >= 2
	})
	fires, jobs := p.fires("tick")
	if jobs != len(fires) {
		t.Errorf("%d tick jobs for %d fires, want one job per fire", jobs, len(fires))
	}
	var lastA, firstB = -1, -1
	for i, f := range fires {
		switch {
		case f.writer == "a" && firstB < 0:
			lastA = i
		case f.writer == "b" && firstB < 0:
			firstB = i
		case f.writer == "b":
		default:
			t.Fatalf("fire %d by %s at %s after b's first: fires %v", i, f.writer, f.at, fires) // a is dead
		}
		// A fire's time is its slot, or later when late: never two in
		// one slot (second).
		if i > 0 && !f.at.Truncate(time.Second).After(fires[i-1].at.Truncate(time.Second)) {
			t.Errorf("fires %d and %d both in the slot of %s: %v", i-1, i, f.at.Truncate(time.Second), fires)
		}
	}
	if lastA < 0 || firstB != lastA+1 {
		t.Fatalf("fires %v: want a's, then b's", fires)
	}
	// The slots after a's last fire up to b's first.
	catchUp := fires[firstB]
	missed := int(catchUp.at.Truncate(time.Second).Sub(fires[lastA].at.Truncate(time.Second)) / time.Second)
	if missed < 1 {
		t.Errorf("b's first fire at %s, a's last at %s: the failover (lease %s) missed no slot?", catchUp.at, fires[lastA].at, lease)
	}
	// The missed slots fire once, at the takeover: b's first fire comes
	// right when it took the lease (it loads the state first: within 2 s
	// on a loaded box), its time later than every missed slot.
	if catchUp.at.Before(takeover) || catchUp.at.Sub(takeover) > 2*time.Second {
		t.Errorf("b's first fire at %s, the takeover at %s: want the missed slots fired at the takeover", catchUp.at, takeover)
	}
	// And it is the missed slots' fire, not the next slot's: b scheduled
	// the trigger after a's last recorded fire, a slot already past, as a
	// restarting server does.
	if next, ok := scheduledNext(t, b.log); !ok {
		t.Errorf("b's log has no \"trigger scheduled\" line")
	} else if want := fires[lastA].at.Truncate(time.Second).Add(time.Second); !next.Equal(want) || !next.Before(catchUp.at) {
		t.Errorf("b scheduled the trigger's next fire at %s, want a's last fire's next slot %s, already past at its first fire %s", next, want, catchUp.at)
	}
	// Once: b's next fire is the next slot after the catch-up's, not
	// another missed one.
	next := fires[firstB+1].at
	if want := catchUp.at.Truncate(time.Second).Add(time.Second); next.Truncate(time.Second) != want {
		t.Errorf("b's second fire at %s, want in the slot after the catch-up (%s): %v", next, want, fires)
	}
	t.Logf("%d fires (%d on a, %d on b), one job each; the takeover at %s missed %d slot(s), fired once at %s (%s after it)",
		len(fires), lastA+1, len(fires)-firstB, takeover.Format("15:04:05.000"), missed,
		catchUp.at.Format("15:04:05.000"), catchUp.at.Sub(takeover).Round(time.Millisecond))
}

// scheduledNext reads the next fire time a replica's scheduler computed
// when it started (the log's "trigger scheduled" line).
func scheduledNext(t *testing.T, log string) (time.Time, bool) {
	t.Helper()
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.Contains(line, `msg="trigger scheduled"`) {
			continue
		}
		_, after, ok := strings.Cut(line, " next=")
		if !ok {
			continue
		}
		next, err := time.Parse(time.RFC3339Nano, strings.Fields(after)[0])
		if err != nil {
			t.Fatalf("trigger scheduled: next %q: %v", after, err)
		}
		return next, true
	}
	return time.Time{}, false
}

// TestApprovalWaitingAtAFailoverIsDecidedOnTheNewLeader leaves two jobs
// waiting on an approval when the leader is killed: the new leader loads
// them waiting, one is approved through it and the other through the old
// leader restarted as a follower (forwarding), and both finish, their
// next step run once.
func TestApprovalWaitingAtAFailoverIsDecidedOnTheNewLeader(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	p := newPair(t, `tasks:
  release:
    flow:
      ask:
        type: approval
        message: ship it?
      ship:
        depends_on: [ask]
        type: script
        script: echo "$APPLIANCE_JOB_ID" >> `+runs+`
`)
	a := p.start("a", 1)
	waitFor(t, 10*time.Second, "replica a to lead", a.leads)
	p.recordWrites()
	b := p.start("b", 1)
	var ids []string
	for range 2 {
		id, err := execute(t, "release", uuid.NewString(), b) // through the follower
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	waiting := func(r *replica, id string) bool {
		j, err := r.job(id)
		return err == nil && j.Status == "running" && len(j.Steps) > 0 && j.Steps[0].Status == "waiting"
	}
	for _, id := range ids {
		waitFor(t, 10*time.Second, "job "+id+" to wait", func() bool { return waiting(a, id) })
	}
	p.failover(a, b)
	a = p.start("a", 1) // back, as a follower
	waitFor(t, 5*time.Second, "replica a to follow b", func() bool {
		st, err := a.status()
		return err == nil && !st.Leading && st.Leader == b.url
	})
	for i, via := range []*replica{b, a} {
		if !waiting(via, ids[i]) {
			j, err := via.job(ids[i])
			t.Fatalf("job %s after the failover: %+v %v, want waiting", ids[i], j, err)
		}
		code, err := call("POST", via.url+"/api/jobs/"+ids[i]+"/steps/ask/approve", `{"approved": true}`, nil, nil)
		if err != nil || code != 200 {
			t.Fatalf("approve job %s through %s: %d %v", ids[i], via.name, code, err)
		}
	}
	for _, id := range ids {
		if j := b.waitEnded(t, id, 20*time.Second); j.Status != "completed" {
			t.Errorf("job %s ended %s, want completed", id, j.Status)
		}
	}
	raw, err := os.ReadFile(runs)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(raw))
	sort.Strings(lines)
	want := append([]string(nil), ids...)
	sort.Strings(want)
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("the ship step ran for %v, want once for each of %v", lines, want)
	}
}

// targets reads the event source's target jobs: how many each event
// (input n) made, and how many of them ended, in one statement.
func (p *pair) targets() (perEvent map[int]int, total, ended int) {
	p.t.Helper()
	rows, err := p.connect().Query(context.Background(), `SELECT (convert_from(rec, 'UTF8')::jsonb #>> '{input,n}')::int, status
		FROM jobs WHERE task_name = 'handle'`)
	if err != nil {
		p.t.Fatal(err)
	}
	defer rows.Close()
	perEvent = map[int]int{}
	for rows.Next() {
		var n int
		var status string
		if err := rows.Scan(&n, &status); err != nil {
			p.t.Fatal(err)
		}
		perEvent[n]++
		total++
		if terminal(status) {
			ended++
		}
	}
	if err := rows.Err(); err != nil {
		p.t.Fatal(err)
	}
	return perEvent, total, ended
}

// TestEventSourceRestartsOnTheNewLeader kills the leader while its
// consumer emits 200 events through max_in_flight 2: the new leader
// starts the consumer again after the events the database accepted
// (APPLIANCE_EVENT_OFFSET), and each event has exactly one job, which
// completes (the target step retries when its run died with the leader).
func TestEventSourceRestartsOnTheNewLeader(t *testing.T) {
	const events = 200
	p := newPair(t, fmt.Sprintf(`tasks:
  produce:
    flow:
      emit:
        type: script
        script: |
          i=$((APPLIANCE_EVENT_OFFSET + 1))
          while [ $i -le %d ]; do echo "OUTPUT: {\"n\": $i}"; i=$((i + 1)); done
  handle:
    input:
      n: {type: integer, required: true}
    flow:
      ok:
        type: script
        retries: 2
        retry_delay: 1s
        script: "true"
triggers:
  numbers:
    type: event_source
    task: produce
    target_task: handle
    input: {n: 0}
    restart_policy: on_failure
    max_in_flight: 2
`, events))
	a := p.start("a", 4)
	waitFor(t, 10*time.Second, "replica a to lead", a.leads)
	p.recordWrites()
	b := p.start("b", 4)
	waitFor(t, 30*time.Second, "60 target jobs", func() bool { _, n, _ := p.targets(); return n >= 60 })
	takeover := p.failover(a, b)
	_, atKill, _ := p.targets()
	// Done: every event has its job, all ended, and no consumer is live
	// (a later one could only add jobs).
	waitFor(t, 60*time.Second, "every event's job to end and the consumer too", func() bool {
		_, total, ended := p.targets()
		var live int
		err := p.connect().QueryRow(context.Background(),
			`SELECT count(*) FROM jobs WHERE task_name = 'produce' AND active`).Scan(&live)
		return err == nil && total >= events && ended == total && live == 0
	})
	perEvent, total, _ := p.targets()
	if total != events {
		t.Errorf("%d target jobs for %d events", total, events)
	}
	for n := 1; n <= events; n++ {
		if perEvent[n] != 1 {
			t.Errorf("event %d made %d jobs, want 1", n, perEvent[n])
		}
	}
	var consumers, completed int
	if err := p.connect().QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE status = 'completed')
		FROM jobs WHERE task_name = 'produce'`).Scan(&consumers, &completed); err != nil {
		t.Fatal(err)
	}
	var notCompleted int
	if err := p.connect().QueryRow(context.Background(),
		`SELECT count(*) FROM jobs WHERE task_name = 'handle' AND status <> 'completed'`).Scan(&notCompleted); err != nil {
		t.Fatal(err)
	}
	if notCompleted != 0 {
		t.Errorf("%d target jobs did not complete", notCompleted)
	}
	if completed != 1 {
		t.Errorf("%d consumer jobs, %d completed: want the last one completed", consumers, completed)
	}
	t.Logf("the leader killed after %d target jobs, b took over at %s; %d events, one job each, all completed; %d consumer job(s)",
		atKill, takeover.Format("15:04:05.000"), events, consumers)
}
