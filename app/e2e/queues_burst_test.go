package e2e

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api/wire"
)

// The burst tests run the real binary: 1,000 jobs of a task with
// `concurrency: {limit: 3}` submitted by 32 clients at once, while a
// sampler reads the running count throughout. The first three jobs hold
// their slots on a gate file until every job is created, so the other 997
// are all in line when the line starts to move, and the order they start
// in can be checked against priority, then creation.
const (
	burstJobs    = 1000
	burstClients = 32
	burstLimit   = 3
)

func burstWorkspace(gate string) string {
	return fmt.Sprintf(`tasks:
  limited:
    input:
      priority: {type: integer, default: 0}
    concurrency: {limit: %d, priority: "{{ input.priority }}"}
    flow:
      work:
        type: script
        script: while [ ! -e %q ]; do sleep 0.01; done
`, burstLimit, gate)
}

// burst is one burst against a server at base.
type burst struct {
	t        *testing.T
	base     string
	priority map[string]int // by job id
	sampled  atomic.Int64
	maxSeen  atomic.Int64
	stop     chan struct{}
	sampling sync.WaitGroup
}

// submit creates the jobs from burstClients clients at once, priorities
// -5, 0 and 5 in turn, and fails the test on any refusal.
func (b *burst) submit() {
	var mu sync.Mutex
	b.priority = map[string]int{}
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range burstClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= burstJobs {
					return
				}
				p := []int{-5, 0, 5}[i%3]
				var out struct {
					JobID string `json:"job_id"`
				}
				code, err := tryDo("POST", b.base+"/api/workspaces/ws/tasks/limited/execute", fmt.Sprintf(`{"input": {"priority": %d}}`, p), &out)
				if err != nil || code != 200 {
					b.t.Errorf("submit job %d: status %d, %v", i, code, err)
					return
				}
				mu.Lock()
				b.priority[out.JobID] = p
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(b.priority) != burstJobs {
		b.t.Fatalf("%d of %d jobs created", len(b.priority), burstJobs)
	}
}

// sample reads the running count over and over until stopped; the server
// being down (a kill) only pauses it.
func (b *burst) sample() {
	b.stop = make(chan struct{})
	b.sampling.Add(1)
	go func() {
		defer b.sampling.Done()
		for {
			select {
			case <-b.stop:
				return
			default:
			}
			var page wire.JobList
			code, err := tryDo("GET", b.base+"/api/jobs?workspace=ws&task_name=limited&status=running&limit=1", "", &page)
			if err != nil || code != 200 {
				continue
			}
			b.sampled.Add(1)
			for n := int64(page.Total); ; {
				m := b.maxSeen.Load()
				if n <= m || b.maxSeen.CompareAndSwap(m, n) {
					break
				}
			}
		}
	}()
}

func (b *burst) stopSampling() {
	close(b.stop)
	b.sampling.Wait()
	if b.maxSeen.Load() > burstLimit {
		b.t.Errorf("the running count reached %d, over the limit of %d", b.maxSeen.Load(), burstLimit)
	}
	if b.sampled.Load() < 20 {
		b.t.Errorf("only %d samples of the running count were taken", b.sampled.Load())
	}
	b.t.Logf("%d samples of the running count, at most %d running", b.sampled.Load(), b.maxSeen.Load())
}

// jobs reads every job of the burst, by cursor.
func (b *burst) jobs() []wire.Job {
	var all []wire.Job
	cursor := ""
	for {
		q := url.Values{"workspace": {"ws"}, "task_name": {"limited"}, "limit": {"500"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page wire.JobList
		if code, err := tryDo("GET", b.base+"/api/jobs?"+q.Encode(), "", &page); err != nil || code != 200 {
			b.t.Fatalf("list jobs: %d %v", code, err)
		}
		all = append(all, page.Items...)
		if page.NextCursor == nil {
			return all
		}
		cursor = *page.NextCursor
	}
}

// waitEnded waits until every job of the burst has ended.
func (b *burst) waitEnded(deadline time.Duration) []wire.Job {
	var jobs []wire.Job
	end := time.Now().Add(deadline)
	for {
		jobs = b.jobs()
		live := 0
		for _, j := range jobs {
			if j.CompletedAt == nil {
				live++
			}
		}
		if live == 0 && len(jobs) == burstJobs {
			return jobs
		}
		if time.Now().After(end) {
			b.t.Fatalf("%d of %d jobs still live after %s", live, len(jobs), deadline)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkOrder checks that the jobs got their slots by priority, then
// creation, exactly.
func (b *burst) checkOrder(jobs []wire.Job) {
	b.t.Helper()
	if len(jobs) < 10 {
		b.t.Fatalf("only %d jobs to check the order of", len(jobs))
	}
	want := append([]wire.Job(nil), jobs...)
	sort.Slice(want, func(i, j int) bool {
		pi, pj := b.priority[want[i].JobID], b.priority[want[j].JobID]
		if pi != pj {
			return pi > pj
		}
		if !want[i].CreatedAt.Equal(want[j].CreatedAt) {
			return want[i].CreatedAt.Before(want[j].CreatedAt)
		}
		return want[i].JobID < want[j].JobID
	})
	rank := map[string]int{}
	for i, j := range want {
		rank[j.JobID] = i
	}
	// A job's place is when the loop gave it its slot: its first step's
	// ready time, set in that batch. (Its started_at is when a worker
	// reported the step started, which a loaded machine's scheduling can
	// reorder among the jobs holding slots at once.) Slots the loop gave
	// in one batch share their time: a tie says nothing of their order,
	// so it is read in the order wanted.
	granted := map[string]time.Time{}
	for _, j := range jobs {
		var detail wire.JobDetail
		if code, err := tryDo("GET", b.base+"/api/jobs/"+j.JobID, "", &detail); err != nil || code != 200 || len(detail.Steps) == 0 || detail.Steps[0].ReadyAt == nil {
			b.t.Fatalf("job %s: %d %v, steps %+v", j.JobID, code, err, detail.Steps)
		}
		granted[j.JobID] = *detail.Steps[0].ReadyAt
	}
	got := append([]wire.Job(nil), jobs...)
	sort.Slice(got, func(i, j int) bool {
		gi, gj := granted[got[i].JobID], granted[got[j].JobID]
		if !gi.Equal(gj) {
			return gi.Before(gj)
		}
		return rank[got[i].JobID] < rank[got[j].JobID]
	})
	for i, j := range got {
		if d := i - rank[j.JobID]; d != 0 {
			b.t.Errorf("job %s (priority %d) got its slot at place %d, but is at %d by priority then creation", j.JobID, b.priority[j.JobID], i+1, rank[j.JobID]+1)
			return
		}
	}
	b.t.Logf("%d jobs got their slots by priority then creation", len(jobs))
}

// linedUp is the jobs the line held: all but those holding the slots
// when the line filled, which took them as they came.
func linedUp(jobs []wire.Job, holders map[string]bool) []wire.Job {
	var out []wire.Job
	for _, j := range jobs {
		if !holders[j.JobID] {
			out = append(out, j)
		}
	}
	return out
}

// waitLineFull waits until limit jobs run and the rest wait in line, and
// returns the running ones.
func (b *burst) waitLineFull() map[string]bool {
	waitUntil(b.t, "the burst to fill the line", func() bool {
		var page wire.JobList
		code, err := tryDo("GET", b.base+"/api/jobs?queued=true&limit=1", "", &page)
		return err == nil && code == 200 && page.Total == burstJobs-burstLimit
	})
	var page wire.JobList
	waitUntil(b.t, "the slots' holders to run", func() bool {
		code, err := tryDo("GET", b.base+"/api/jobs?workspace=ws&task_name=limited&status=running", "", &page)
		return err == nil && code == 200 && page.Total == burstLimit
	})
	holders := map[string]bool{}
	for _, j := range page.Items {
		if j.Queue == nil {
			holders[j.JobID] = true
		}
	}
	if len(holders) != burstLimit {
		b.t.Fatalf("%d jobs hold a slot with the line full, want %d", len(holders), burstLimit)
	}
	return holders
}

func TestBurstOfAThousandJobsHoldsTheLimitAndTheOrder(t *testing.T) {
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	p := startBinaryServer(t, burstWorkspace(gate), 8)
	b := &burst{t: t, base: "http://" + p.addr}
	b.sample()
	start := time.Now()
	b.submit()
	holders := b.waitLineFull()
	openGate(t, gate)
	jobs := b.waitEnded(3 * time.Minute)
	b.stopSampling()
	t.Logf("%d jobs through a limit of %d in %s", burstJobs, burstLimit, time.Since(start).Round(time.Millisecond))
	for _, j := range jobs {
		if j.Status != "completed" {
			t.Fatalf("job %s is %s, want completed", j.JobID, j.Status)
		}
	}
	b.checkOrder(linedUp(jobs, holders))
}

func TestBurstHoldsTheLimitAndTheLineAcrossKillNine(t *testing.T) {
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	p := startBinaryServer(t, burstWorkspace(gate), 8)
	b := &burst{t: t, base: "http://" + p.addr}
	b.sample()
	b.submit()
	b.waitLineFull()
	openGate(t, gate)
	// Kill the server once a third of the jobs have ended.
	waitUntil(t, "a third of the burst to end", func() bool {
		var page wire.JobList
		code, err := tryDo("GET", b.base+"/api/jobs?workspace=ws&task_name=limited&status=completed&limit=1", "", &page)
		return err == nil && code == 200 && page.Total >= burstJobs/3
	})
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	killedAt := time.Now()
	p.restart()
	jobs := b.waitEnded(3 * time.Minute)
	b.stopSampling()
	// The steps running at the kill ran in the dead server's in-process
	// pool: they failed (a lost worker). Every other job completed.
	failed := 0
	var after []wire.Job
	for _, j := range jobs {
		switch j.Status {
		case "completed":
		case "failed":
			failed++
		default:
			t.Fatalf("job %s is %s after the restart", j.JobID, j.Status)
		}
		if j.StartedAt != nil && j.StartedAt.After(killedAt) {
			after = append(after, j)
		}
	}
	if failed > burstLimit {
		t.Fatalf("%d jobs failed across the kill, more than the %d that could run", failed, burstLimit)
	}
	t.Logf("%d jobs started after the restart; %d failed with the killed server", len(after), failed)
	// The line kept its order across the restart.
	b.checkOrder(after)
}

// openGate lets the jobs holding their slots end, and every one after them.
func openGate(t *testing.T, gate string) {
	t.Helper()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
