package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

// Retention deletes, over several small transactions, the jobs that
// ended before the cutoff (a job that never started ended when it was
// created), with their steps, counts and an event consumer's marks, and
// leaves live jobs, jobs whose hooks are pending and newer ones alone. A
// job with more steps than a transaction's budget loses them over
// several, the record last.
func TestDeleteEndedJobsKeepsLiveAndRecentOnes(t *testing.T) {
	db := open(t, pgtest.DSN(t))
	ctx := context.Background()
	ended := func(id, status string, created, completed int) *engine.Job {
		j := newJob(id, "ops", "build", created)
		j.Status = status
		if completed > 0 {
			j.CompletedAt = ptr(at(completed))
		}
		return j
	}
	hooks := ended("hooks", engine.JobFailed, 4, 10)
	hooks.HooksPending = true
	consumer := ended("consumer", engine.JobCompleted, 6, 20)
	consumer.SourceType = engine.SourceTrigger
	b := &engine.Batch{Jobs: []*engine.Job{
		ended("done", engine.JobCompleted, 1, 10), ended("never", engine.JobSkipped, 2, 0),
		newJob("live", "ops", "build", 3), hooks, ended("recent", engine.JobCompleted, 5, 100), consumer,
	}}
	for i := range 5 {
		st := newStep("consumer", fmt.Sprintf("s%d", i), i)
		st.Status, st.WorkerID, st.ReadyAt = engine.StepCompleted, ptr("w1"), ptr(at(7))
		b.Steps = append(b.Steps, st)
		b.EventMarks = append(b.EventMarks, engine.EventMark{Source: "ops/in", JobID: "consumer", Step: st.Name, Run: "r", Seq: 1, Consumed: 1})
	}
	b.Steps = append(b.Steps, newStep("done", "a", 0), newStep("live", "a", 0))
	if err := db.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	cutoff := at(50)
	if got, err := db.EndedBefore(ctx, []string{"live", "done", "gone", "recent", "hooks", "never"}, cutoff); err != nil ||
		fmt.Sprint(got) != "[done gone never]" {
		t.Errorf("EndedBefore = %v, %v; want [done gone never]", got, err)
	}
	var deleted []string
	steps, calls := 0, 0
	var from []byte
	for {
		calls++
		res, err := db.DeleteEndedJobs(ctx, cutoff, from, 3)
		if err != nil {
			t.Fatal(err)
		}
		deleted, steps = append(deleted, res.Jobs...), steps+res.Steps
		if from = res.Next; from == nil {
			break
		}
		if calls > 20 {
			t.Fatal("the sweep does not end")
		}
	}
	slices.Sort(deleted)
	if fmt.Sprint(deleted) != "[consumer done never]" || steps != 6 {
		t.Errorf("deleted %v and %d steps, want [consumer done never] and 6", deleted, steps)
	}
	if calls < 3 {
		t.Errorf("a budget of 3 swept 3 jobs and 6 steps in %d transactions", calls)
	}
	jobs, total, err := db.Jobs(ctx, engine.JobFilter{Workspace: "ops"})
	if err != nil || total != 3 || len(jobs) != 3 {
		t.Errorf("jobs left: %d (total %d), %v; want live, hooks, recent", len(jobs), total, err)
	}
	if _, total, _ := db.Jobs(ctx, engine.JobFilter{Statuses: []string{engine.JobCompleted}}); total != 1 {
		t.Errorf("completed jobs counted after the sweep: %d, want 1", total)
	}
	if _, n, _ := db.WorkerSteps(ctx, "w1", 10); n != 0 {
		t.Errorf("the swept steps still count as w1's claims: %d", n)
	}
	if sum, _ := db.StepSummary(ctx, "consumer"); len(sum) != 0 {
		t.Errorf("the swept job's step counts: %v", sum)
	}
	if run, _, _ := db.EventMark(ctx, "consumer", "s0"); run != "" {
		t.Errorf("the swept consumer's event mark is left: %q", run)
	}
	if n, _ := db.EventsConsumed(ctx, "ops/in"); n != 1 {
		t.Errorf("the trigger's count went with the job: %d, want 1", n)
	}
	if s, _ := db.Steps(ctx, "live"); len(s) != 1 {
		t.Errorf("the live job's steps: %d, want 1", len(s))
	}
}

func ptr[T any](v T) *T { return &v }
