package failover_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
)

// stepScript is a script step that appends "start JOB STEP NANOS" to a
// file as it begins and "end ..." as it ends, with retries for the runs a
// failover loses.
func stepScript(name, dependsOn, file, sleep string) string {
	deps := ""
	if dependsOn != "" {
		deps = "\n        depends_on: [" + dependsOn + "]"
	}
	return fmt.Sprintf(`      %s:%s
        type: script
        retries: 3
        retry_delay: 1s
        script: |
          echo "start $APPLIANCE_JOB_ID $APPLIANCE_STEP $(date +%%s%%N)" >> %s
          sleep %s
          echo "end $APPLIANCE_JOB_ID $APPLIANCE_STEP $(date +%%s%%N)" >> %s
`, name, deps, file, sleep, file)
}

// run is one line of the steps' file.
type run struct {
	what, job, step string
	at              time.Time
}

func readRuns(t testing.TB, file string) []run {
	t.Helper()
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var runs []run
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 4 {
			t.Fatalf("steps' file: bad line %q", sc.Text())
		}
		ns, err := strconv.ParseInt(fields[3], 10, 64)
		if err != nil {
			t.Fatalf("steps' file: bad time in %q", sc.Text())
		}
		runs = append(runs, run{what: fields[0], job: fields[1], step: fields[2], at: time.Unix(0, ns)})
	}
	return runs
}

// completedSteps reads the steps the database holds completed, by
// "job step".
func (p *pair) completedSteps() map[string]bool {
	p.t.Helper()
	rows, err := p.connect().Query(context.Background(), `SELECT job_id, name FROM steps WHERE status = 'completed'`)
	if err != nil {
		p.t.Fatal(err)
	}
	defer rows.Close()
	done := map[string]bool{}
	for rows.Next() {
		var job, step string
		if err := rows.Scan(&job, &step); err != nil {
			p.t.Fatal(err)
		}
		done[job+" "+step] = true
	}
	if err := rows.Err(); err != nil {
		p.t.Fatal(err)
	}
	return done
}

// TestKillNineOfTheLeaderFailsOver kills the leader with SIGKILL during a
// burst of submissions (to both replicas, retried with their
// Idempotency-Key as the CLI does): the follower takes the lease within
// lease + renew, every acknowledged job exists once and ends completed,
// and no step the database held completed at the takeover runs again.
func TestKillNineOfTheLeaderFailsOver(t *testing.T) {
	steps := filepath.Join(t.TempDir(), "runs")
	p := newPair(t, "tasks:\n  work:\n    flow:\n"+stepScript("first", "", steps, "0.05")+stepScript("second", "first", steps, "0.05"))
	a := p.start("a", 4)
	waitFor(t, 10*time.Second, "replica a to lead", a.leads)
	p.recordWrites()
	b := p.start("b", 4)
	waitFor(t, 5*time.Second, "replica b to follow a", func() bool {
		st, err := b.status()
		return err == nil && !st.Leading && st.Leader == a.url
	})
	before := p.epoch()

	// Submissions go on at a steady pace across the kill, which comes
	// once the leader has completed some steps.
	const jobs = 150
	subs := submit(t, "work", jobs, 6, 20*time.Millisecond, a, b)
	waitFor(t, 30*time.Second, "the leader to complete 40 steps", func() bool { return len(p.completedSteps()) >= 40 })
	killedAt := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ackedAtKill := subs.count()
	// The takeover: the lease's epoch moves on. Every transaction of the
	// dead leader held the lease row FOR SHARE, so the steps it completed
	// are all in the database by now, and none re-run by the new leader
	// yet (it has not loaded the state).
	waitFor(t, lease+renew+3*time.Second, "the follower to take the lease", func() bool { return p.epoch() > before })
	tookLease := time.Since(killedAt)
	completed := p.completedSteps()
	snapshotAt := time.Now()
	waitFor(t, 10*time.Second, "replica b to lead", b.leads)
	leading := time.Since(killedAt)
	acked := subs.wait(t)
	t.Logf("kill -9 of the leader: the follower took the lease after %s and answered as leader after %s (lease %s, renew %s)",
		tookLease.Round(time.Millisecond), leading.Round(time.Millisecond), lease, renew)
	if limit := lease + renew + time.Second; tookLease > limit {
		t.Errorf("the follower took the lease %s after the kill, want within lease + renew (+1s for this box): %s", tookLease, limit)
	}

	for _, id := range acked {
		if j := b.waitEnded(t, id, time.Minute); j.Status != "completed" {
			t.Errorf("job %s ended %s, want completed", id, j.Status)
		}
	}
	var n int
	if err := p.connect().QueryRow(context.Background(), `SELECT count(*) FROM jobs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != jobs {
		t.Errorf("%d jobs in the database, want %d: one per Idempotency-Key", n, jobs)
	}
	reran := 0
	for _, r := range readRuns(t, steps) {
		if r.what == "start" && r.at.After(snapshotAt) && completed[r.job+" "+r.step] {
			t.Errorf("step %s of job %s ran again at %s, after the takeover, though it was completed", r.step, r.job, r.at)
		}
		if r.what == "start" && r.at.After(killedAt) {
			reran++
		}
	}
	t.Logf("%d jobs acknowledged (%d before the kill), all ended completed; %d steps completed at the takeover, none ran again; %d step runs began after the kill",
		len(acked), ackedAtKill, len(completed), reran)
}

// TestStoppedLeaderFollowsAfterResuming stops the leader (SIGSTOP) past
// its lease while a step runs on it: the follower takes over and runs the
// step again as its next attempt. Resumed (SIGCONT), the old leader finds
// it lost the lease, follows (forwarding) within a renew interval, and
// the database shows no write of it after the takeover: its late step
// report is refused by the fence.
func TestStoppedLeaderFollowsAfterResuming(t *testing.T) {
	steps := filepath.Join(t.TempDir(), "runs")
	p := newPair(t, "tasks:\n  slow:\n    flow:\n"+stepScript("nap", "", steps, "1.5"))
	a := p.start("a", 2)
	waitFor(t, 10*time.Second, "replica a to lead", a.leads)
	p.recordWrites()
	b := p.start("b", 2)
	before := p.epoch()

	id, err := execute(t, "slow", uuid.NewString(), a)
	if err != nil {
		t.Fatal(err)
	}
	// Its process began, and its start is durable: the new leader finds
	// it running on a lost worker.
	waitFor(t, 10*time.Second, "the step to run on a", func() bool {
		if len(readRuns(t, steps)) == 0 {
			return false
		}
		var n int
		err := p.connect().QueryRow(context.Background(), `SELECT count(*) FROM steps WHERE status = 'running'`).Scan(&n)
		return err == nil && n == 1
	})
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	waitFor(t, lease+renew+5*time.Second, "replica b to lead", b.leads)
	t.Logf("SIGSTOP of the leader: b leads %s later", time.Since(stoppedAt).Round(time.Millisecond))
	// The step's process, not stopped, ends meanwhile; a reports it once
	// resumed.
	waitFor(t, 10*time.Second, "the step's first run to end", func() bool {
		for _, r := range readRuns(t, steps) {
			if r.what == "end" {
				return true
			}
		}
		return false
	})

	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	waitFor(t, renew+2*time.Second, "resumed replica a to follow b", func() bool {
		st, err := a.status()
		return err == nil && !st.Leading && st.Leader == b.url
	})
	t.Logf("SIGCONT: a follows b %s after resuming (renew %s)", time.Since(resumedAt).Round(time.Millisecond), renew)

	j := b.waitEnded(t, id, 30*time.Second)
	if j.Status != "completed" || len(j.Steps) != 1 || j.Steps[0].Attempt != 2 {
		t.Fatalf("job %s: %s, steps %+v; want completed with the step on its second attempt", id, j.Status, j.Steps)
	}
	starts := 0
	for _, r := range readRuns(t, steps) {
		if r.what == "start" {
			starts++
		}
	}
	if starts != 2 {
		raw, _ := os.ReadFile(steps)
		t.Errorf("the step began %d times, want 2: once on a, once on b; step %+v; runs:\n%s", starts, j.Steps[0], raw)
	}
	// Through the old leader, now forwarding.
	if via, err := a.job(id); err != nil || via.Status != "completed" {
		t.Fatalf("job via a: %+v, %v", via.JobHead, err)
	}
	if n := p.lateWrites("a", before+1); n != 0 {
		t.Errorf("replica a wrote %d rows after b took the lease", n)
	}
	// The old leader's term ended and the fence refused what it tried.
	waitFor(t, 5*time.Second, "a to log that it stopped leading", func() bool {
		b, _ := os.ReadFile(a.log)
		return strings.Contains(string(b), "leadership: stopped leading")
	})
}

// BenchmarkFailoverAfterKill kills the leader of a pair with SIGKILL, b.N
// times, and reports the median time from the kill until the follower
// answers an execute as the leader (lease 2s, renew 500ms); the killed
// replica comes back as a follower for the next round.
//
//	go test ./app/e2e/failover -run X -bench FailoverAfterKill -benchtime 10x
func BenchmarkFailoverAfterKill(b *testing.B) {
	p := newPair(b, "tasks:\n  hello:\n    flow:\n      hi:\n        type: script\n        script: echo hi\n")
	reps := []*replica{p.start("a", 1)}
	waitFor(b, 10*time.Second, "replica a to lead", reps[0].leads)
	reps = append(reps, p.start("b", 1))
	var took []time.Duration
	b.ResetTimer()
	for i := range b.N {
		leader, follower := reps[i%2], reps[(i+1)%2]
		waitFor(b, 10*time.Second, "the leader to lead", leader.leads)
		if _, err := execute(b, "hello", uuid.NewString(), leader); err != nil {
			b.Fatal(err)
		}
		killedAt := time.Now()
		_ = leader.cmd.Process.Signal(syscall.SIGKILL)
		if _, err := execute(b, "hello", uuid.NewString(), follower); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(killedAt))
		_ = leader.cmd.Wait()
		b.StopTimer()
		reps[i%2] = p.start(leader.name, 1)
		b.StartTimer()
	}
	b.StopTimer()
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.ReportMetric(took[len(took)/2].Seconds(), "s-median-failover")
	b.Logf("failover after kill -9 (lease %s, renew %s), %d runs: median %s, min %s, max %s",
		lease, renew, len(took), took[len(took)/2].Round(time.Millisecond), took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
}

// submissions are jobs of one task executed at a steady pace by a few
// clients, each asking the replicas in turn (every other job through the
// second one first, so half cross a follower's forwarding), each with an
// Idempotency-Key of its own.
type submissions struct {
	mu    sync.Mutex
	acked []string // the job ids answered, in the order answered
	errs  []error
	wg    sync.WaitGroup
}

// submit starts jobs of task, one every pace, from clients goroutines.
func submit(t *testing.T, task string, jobs, clients int, pace time.Duration, a, b *replica) *submissions {
	s := &submissions{}
	keys := make(chan int)
	go func() {
		defer close(keys)
		for i := range jobs {
			keys <- i
			time.Sleep(pace)
		}
	}()
	for range clients {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for i := range keys {
				order := []*replica{a, b}
				if i%2 == 1 {
					order = []*replica{b, a}
				}
				id, err := execute(t, task, uuid.NewString(), order...)
				s.mu.Lock()
				if err != nil {
					s.errs = append(s.errs, err)
				} else {
					s.acked = append(s.acked, id)
				}
				s.mu.Unlock()
			}
		}()
	}
	return s
}

// count is how many jobs were acknowledged so far.
func (s *submissions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.acked)
}

// wait waits for every submission and fails t if any failed; it returns
// the acknowledged jobs.
func (s *submissions) wait(t *testing.T) []string {
	t.Helper()
	s.wg.Wait()
	if len(s.errs) > 0 {
		t.Fatalf("%d submissions failed, first: %v", len(s.errs), s.errs[0])
	}
	return s.acked
}
