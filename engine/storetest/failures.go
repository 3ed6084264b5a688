package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"sync"
	"testing"

	"github.com/appliance-sh/appliance/engine"
)

// What a store on a server makes newly likely: commits racing from two
// handles, a batch refused half-way through its writing, a connection cut
// while a commit is under way. The promise is the same for all: a batch
// is applied wholly or not at all, racing batches are applied one after
// the other, and the maintained counts always agree with the records.

// racingCommits: several commits race for the same claim (a step two
// servers both hand out, as around a failover before fencing refuses the
// old leader), from several goroutines, and over two handles on the same
// data where the backend can open a Peer. Every commit succeeds, the
// records end as one batch wrote them all (never the job from one racer
// and a step from another), and the counts agree with them.
func racingCommits(t *testing.T, b Backend) {
	s := b.Open(t)
	handles := []Store{s}
	if b.Peer != nil {
		handles = append(handles, b.Peer(t, s))
	}
	ctx := context.Background()
	const racers, rounds = 4, 25
	var workers []*engine.Worker
	for g := range racers {
		workers = append(workers, worker(fmt.Sprintf("w%d", g), g))
	}
	commit(t, s, &engine.Batch{
		Jobs:    []*engine.Job{job("j1", "ops", "build", engine.JobPending, 0)},
		Steps:   []*engine.Step{step("j1", "a", 0, engine.StepReady), step("j1", "b", 1, engine.StepPending)},
		Workers: workers,
	})
	// Racer g claims both steps for its worker w<g>, and signs the job and
	// the steps; odd racers also complete a, and mark the job running.
	claim := func(g, round int) *engine.Batch {
		by := fmt.Sprintf("w%d/%d", g, round)
		j := job("j1", "ops", "build", engine.JobPending, 0)
		a, bb := step("j1", "a", 0, engine.StepRunning), step("j1", "b", 1, engine.StepRunning)
		if g%2 == 1 {
			j.Status, a.Status = engine.JobRunning, engine.StepCompleted
		}
		j.Output = map[string]any{"by": by}
		for _, st := range []*engine.Step{a, bb} {
			st.WorkerID, st.ReadyAt, st.Output = ptr(fmt.Sprintf("w%d", g)), ptr(at(10+round)), map[string]any{"by": by}
		}
		// The steps first: a batch's order is no lock order.
		return &engine.Batch{Steps: []*engine.Step{bb, a}, Jobs: []*engine.Job{j}}
	}
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for g := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := handles[g%len(handles)]
			for round := range rounds {
				if err := h.Commit(ctx, claim(g, round)); err != nil {
					errs[g] = fmt.Errorf("racer %d round %d: %w", g, round, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("a racing commit failed: %v", err)
	}
	for _, h := range handles {
		j, err := h.Job(ctx, "j1")
		if err != nil {
			t.Fatal(err)
		}
		steps, err := h.Steps(ctx, "j1")
		if err != nil || len(steps) != 2 {
			t.Fatalf("steps after the race: %d, %v", len(steps), err)
		}
		by := j.Output["by"]
		for _, st := range steps {
			if out, _ := st.Output.(map[string]any); out["by"] != by {
				t.Errorf("the job ended as %v wrote it, step %s as %v: two racers' batches mixed", by, st.Name, out["by"])
			}
		}
		holder := *steps[0].WorkerID
		claims := 0
		for _, w := range workers {
			got, total, err := h.WorkerSteps(ctx, w.ID, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != total {
				t.Errorf("%s lists %d claims, counts %d", w.ID, len(got), total)
			}
			if w.ID != holder && total != 0 {
				t.Errorf("%s still counts %d claims; %s holds both steps", w.ID, total, holder)
			}
			claims += total
		}
		if claims != 2 {
			t.Errorf("claims counted over all workers: %d, want the 2 steps once each", claims)
		}
		for _, st := range []string{engine.JobPending, engine.JobRunning} {
			want := 0
			if st == j.Status {
				want = 1
			}
			if _, total := listJobs(t, h, engine.JobFilter{Statuses: []string{st}}); total != want {
				t.Errorf("jobs %s after the race: total %d, want %d (the job is %s)", st, total, want, j.Status)
			}
		}
		if _, total := listJobs(t, h, engine.JobFilter{Workspace: "ops"}); total != 1 {
			t.Errorf("jobs of ops after the race: total %d, want 1", total)
		}
		checkSummary(t, h, "j1")
	}
}

// checkSummary compares a StepPager's counts with the job's records.
func checkSummary(t *testing.T, s Store, jobID string) {
	t.Helper()
	p, ok := s.(engine.StepPager)
	if !ok {
		return
	}
	steps, err := s.Steps(context.Background(), jobID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, st := range steps {
		want[st.Status]++
	}
	if got, err := p.StepSummary(context.Background(), jobID); err != nil || !maps.Equal(got, want) {
		t.Errorf("step summary of %s = %v (%v), the records say %v", jobID, got, err, want)
	}
}

// batchState says which of a test batch's records a store holds: "all",
// "none", or the list of what it holds.
func batchState(t *testing.T, s Store, jobID string, steps int, workerID, source string) string {
	t.Helper()
	ctx := context.Background()
	var have, lack []string
	note := func(what string, ok bool) {
		if ok {
			have = append(have, what)
		} else {
			lack = append(lack, what)
		}
	}
	_, err := s.Job(ctx, jobID)
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		t.Fatal(err)
	}
	note("job", err == nil)
	got, err := s.Steps(ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > 0 && len(got) < steps {
		have = append(have, fmt.Sprintf("%d of %d steps", len(got), steps))
	} else {
		note("steps", len(got) == steps)
	}
	if workerID != "" {
		_, err := s.Worker(ctx, workerID)
		note("worker", err == nil)
	}
	if es, ok := s.(engine.EventStore); ok && source != "" {
		n, err := es.EventsConsumed(ctx, source)
		if err != nil {
			t.Fatal(err)
		}
		note("event count", n > 0)
	}
	switch {
	case len(have) == 0:
		return "none"
	case len(lack) == 0:
		return "all"
	}
	return fmt.Sprintf("%v but not %v", have, lack)
}

// halfWayFailure: a batch one of whose records is refused writes none of
// them, wherever the refused record stands, whether the store refuses it
// before writing (a value JSON cannot encode, in the batch's last step)
// or while writing (text that is not UTF-8, which a database may refuse
// and a file may keep: in the event marks, written last). Either the
// batch is written wholly or nothing of it is, and the counts agree.
func halfWayFailure(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := context.Background()
	commit(t, s, &engine.Batch{Jobs: []*engine.Job{job("j0", "ops", "build", engine.JobCompleted, 0)}})
	build := func(id string, lastOutput any, source string) *engine.Batch {
		j := job(id, "ops", "build", engine.JobRunning, 1)
		var steps []*engine.Step
		for i := range 50 {
			steps = append(steps, step(id, fmt.Sprintf("s%02d", i), i, engine.StepReady))
		}
		steps[len(steps)-1].Output = lastOutput
		return &engine.Batch{
			Jobs: []*engine.Job{j}, Steps: steps, Workers: []*engine.Worker{worker("w-"+id, 1)},
			Fires:      []engine.TriggerFire{{Workspace: "ops", Trigger: "t-" + id, At: at(1)}},
			EventMarks: []engine.EventMark{{Source: source, JobID: id, Step: "s00", Run: "r", Seq: 1, Consumed: 1}},
		}
	}
	err := s.Commit(ctx, build("j1", math.NaN(), "ops/j1"))
	if err == nil {
		t.Fatal("a batch holding a value JSON cannot encode was committed")
	}
	if got := batchState(t, s, "j1", 50, "w-j1", "ops/j1"); got != "none" {
		t.Errorf("a batch refused for its last step left %s written", got)
	}
	if _, ok, _ := s.LastFire("ops", "t-j1"); ok {
		t.Error("a batch refused for its last step recorded its trigger fire")
	}

	src := "ops/\xff\xfe"
	err = s.Commit(ctx, build("j2", nil, src))
	got := batchState(t, s, "j2", 50, "w-j2", src)
	_, fired, _ := s.LastFire("ops", "t-j2")
	switch {
	case err != nil && (got != "none" || fired):
		t.Errorf("a batch refused while written (%v) left %s written (fire recorded: %v)", err, got, fired)
	case err == nil && (got != "all" || !fired):
		t.Errorf("a batch accepted holds %s (fire recorded: %v), want all of it", got, fired)
	}
	t.Logf("text that is not UTF-8: %v", err)

	// The store goes on, its counts untouched by what it refused.
	commit(t, s, build("j3", nil, "ops/j3"))
	want := 2
	if err == nil {
		want = 3
	}
	if _, total := listJobs(t, s, engine.JobFilter{Workspace: "ops", TaskName: "build"}); total != want {
		t.Errorf("jobs after the refused batches: total %d, want %d", total, want)
	}
	for _, id := range []string{"j1", "j2", "j3"} {
		checkSummary(t, s, id)
	}
}

// cutConnections: the store's connections to its server are cut (a
// restart of the database, a network failure), first between commits,
// then again and again while a big commit is under way. Each commit
// fails or succeeds; if it fails, it wrote nothing of its batch or, when
// the cut came between the server's commit and its answer, all of it. The
// next commit succeeds, and the counts agree with the records.
func cutConnections(t *testing.T, b Backend) {
	if b.Sever == nil {
		t.Skip("this backend holds no connections to a server (an embedded file or memory): there is nothing to cut")
	}
	s := b.Open(t)
	ctx := context.Background()
	commit(t, s, &engine.Batch{Jobs: []*engine.Job{job("j0", "ops", "build", engine.JobCompleted, 0)}})
	const rounds, size = 6, 2000
	build := func(r int) *engine.Batch {
		id := fmt.Sprintf("j%d", r+1)
		bt := &engine.Batch{Jobs: []*engine.Job{job(id, "ops", "build", engine.JobRunning, r+1)}}
		for i := range size {
			st := step(id, fmt.Sprintf("s%04d", i), i, engine.StepRunning)
			st.WorkerID, st.ReadyAt = ptr("w1"), ptr(at(r+1))
			bt.Steps = append(bt.Steps, st)
		}
		return bt
	}
	failed := 0
	for r := range rounds {
		id := fmt.Sprintf("j%d", r+1)
		done := make(chan error, 1)
		if r == 0 {
			b.Sever(t, s) // between commits: the pool's idle connections are dead
		}
		go func() { done <- s.Commit(ctx, build(r)) }()
		var err error
		if r == 0 {
			err = <-done
		} else {
		cut:
			for {
				select {
				case err = <-done:
					break cut
				default:
					b.Sever(t, s)
				}
			}
		}
		state := batchState(t, s, id, size, "", "")
		switch {
		case err == nil && state != "all":
			t.Fatalf("round %d: a commit that succeeded holds %s", r, state)
		case err != nil && state != "none" && state != "all":
			t.Fatalf("round %d: a commit cut (%v) left %s", r, err, state)
		}
		if err != nil {
			failed++
			t.Logf("round %d: cut (%v); the batch holds %s", r, err, state)
			// Committed again, as the engine commits its state again after a
			// reload: the store has recovered.
			if err := s.Commit(ctx, build(r)); err != nil {
				t.Fatalf("round %d: the commit after a cut failed too: %v", r, err)
			}
		}
	}
	t.Logf("%d of %d commits were cut", failed, rounds)
	if _, total := listJobs(t, s, engine.JobFilter{Workspace: "ops"}); total != rounds+1 {
		t.Errorf("jobs after the cuts: total %d, want %d", total, rounds+1)
	}
	if ws, total, err := s.WorkerSteps(ctx, "w1", 1); err != nil || total != rounds*size || len(ws) != 1 {
		t.Errorf("claims of w1 after the cuts: total %d, %v; want %d", total, err, rounds*size)
	}
	for r := range rounds {
		checkSummary(t, s, fmt.Sprintf("j%d", r+1))
	}
}
