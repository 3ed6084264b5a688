package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// pageAll walks every cursor page of f, newest first.
func pageAll(t *testing.T, db *DB, f engine.JobFilter) []string {
	t.Helper()
	var ids []string
	for range 1000 {
		jobs, _, err := db.Jobs(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, jobIDs(jobs)...)
		if len(jobs) < f.Limit {
			return ids
		}
		c, _ := engine.ParseJobCursor(engine.CursorOf(jobs[len(jobs)-1]))
		f.Cursor = &c
	}
	t.Fatal("pages never ended")
	return nil
}

// TestJobsCursorNeverRepeatsOrSkipsWhileJobsArrive pages through the list
// while new jobs (newer than every page) are committed between pages, some
// at the very same created_at as the page boundary: every job that existed
// at the start is seen exactly once, in newest-first order.
func TestJobsCursorNeverRepeatsOrSkipsWhileJobsArrive(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	ids := seedJobs(t, db, 95)
	// Ties: three more jobs at the same time as job-050.
	b := &engine.Batch{}
	for _, id := range []string{"job-050a", "job-050b", "job-050c"} {
		b.Jobs = append(b.Jobs, newJob(id, "alpha", "build", 50))
	}
	commit(t, db, b)
	var want []string
	for i := 94; i >= 0; i-- {
		if i == 50 {
			want = append(want, "job-050c", "job-050b", "job-050a")
		}
		want = append(want, ids[i])
	}

	f := engine.JobFilter{Limit: 7}
	var got []string
	for n := 0; ; n++ {
		jobs, total, err := db.Jobs(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if total != 98+n {
			t.Fatalf("page %d: total = %d, want %d", n, total, 98+n)
		}
		got = append(got, jobIDs(jobs)...)
		// A new job arrives between every two pages.
		commit(t, db, &engine.Batch{Jobs: []*engine.Job{newJob(fmt.Sprintf("new-%02d", n), "beta", "test", 1000+n)}})
		if len(jobs) < f.Limit {
			break
		}
		c, err := engine.ParseJobCursor(engine.CursorOf(jobs[len(jobs)-1]))
		if err != nil {
			t.Fatal(err)
		}
		f.Cursor = &c
	}
	if !slices.Equal(got, want) {
		t.Errorf("cursor pages =\n%v\nwant\n%v", got, want)
	}
}

// TestJobsFilterByStatusAndSourceType filters by one and several statuses,
// by source type and by both with a workspace, with exact totals, and
// follows status changes (the index moves in the same commit).
func TestJobsFilterByStatusAndSourceType(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	statuses := []string{engine.JobPending, engine.JobRunning, engine.JobCompleted, engine.JobFailed}
	sources := []string{engine.SourceAPI, engine.SourceWebhook, engine.SourceTrigger}
	var all []*engine.Job
	b := &engine.Batch{}
	for i := range 60 {
		j := newJob(fmt.Sprintf("job-%03d", i), []string{"alpha", "beta"}[i%2], "build", i)
		j.Status = statuses[i%4]
		j.SourceType = sources[i%3]
		all = append(all, j)
		b.Jobs = append(b.Jobs, j)
	}
	commit(t, db, b)
	expect := func(f engine.JobFilter) []string {
		var ids []string
		for i := len(all) - 1; i >= 0; i-- {
			j := all[i]
			if (len(f.Statuses) == 0 || slices.Contains(f.Statuses, j.Status)) &&
				(f.SourceType == "" || j.SourceType == f.SourceType) && (f.Workspace == "" || j.Workspace == f.Workspace) {
				ids = append(ids, j.ID)
			}
		}
		return ids
	}
	check := func(f engine.JobFilter) {
		t.Helper()
		want := expect(f)
		f.Limit = 4
		if got := pageAll(t, db, f); !slices.Equal(got, want) {
			t.Errorf("%+v: pages = %v, want %v", f, got, want)
		}
		f.Limit = 100
		if _, total, _ := db.Jobs(ctx, f); total != len(want) {
			t.Errorf("%+v: total = %d, want %d", f, total, len(want))
		}
		f.Limit, f.Offset = 3, 2
		jobs, _, _ := db.Jobs(ctx, f)
		wantOff := want[min(2, len(want)):min(5, len(want))]
		if got := jobIDs(jobs); !slices.Equal(got, wantOff) {
			t.Errorf("%+v: offset page = %v, want %v", f, got, wantOff)
		}
	}
	for _, f := range []engine.JobFilter{
		{Statuses: []string{engine.JobFailed}},
		{Statuses: []string{engine.JobPending, engine.JobFailed, engine.JobPending}},
		{SourceType: engine.SourceWebhook},
		{Statuses: []string{engine.JobRunning, engine.JobCompleted}, SourceType: engine.SourceAPI},
		{Statuses: []string{engine.JobRunning}, Workspace: "beta"},
		{SourceType: engine.SourceTrigger, Workspace: "alpha"},
		{Statuses: []string{engine.JobCancelled}},
	} {
		check(f)
	}
	// A status change moves the job between status indexes.
	for _, j := range all[:10] {
		j.Status = engine.JobCancelled
	}
	commit(t, db, &engine.Batch{Jobs: all[:10]})
	check(engine.JobFilter{Statuses: []string{engine.JobCancelled}})
	check(engine.JobFilter{Statuses: []string{engine.JobPending}})
	assertCountsMatchIndexes(t, db)
}

// TestOpenRebuildsListIndexesOfAnOlderDatabase drops the status and source
// indexes and their counters, as a database from before them lacks them:
// the next Open rebuilds them from the jobs.
func TestOpenRebuildsListIndexesOfAnOlderDatabase(t *testing.T) {
	db, path := openTemp(t)
	ids := seedJobs(t, db, 30)
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketByStatus, bucketBySource} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		for _, k := range [][]byte{countStatus(engine.JobPending), countSource(engine.SourceAPI)} {
			if err := tx.Bucket(bucketCounts).Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	jobs, total, err := db.Jobs(context.Background(), engine.JobFilter{Statuses: []string{engine.JobPending}, Limit: 5})
	if err != nil || total != 30 || len(jobs) != 5 || jobs[0].ID != ids[29] {
		t.Errorf("after reopen: %v of %d, %v; want 5 of 30 from %s", jobIDs(jobs), total, err, ids[29])
	}
	assertCountsMatchIndexes(t, db)
}

// TestStepsPageAndSummaryFollowStatusChanges pages a job's steps by
// position, by statuses and flow steps only, and counts them per status
// from counters that move with each status change; a database without the
// step status index gets it rebuilt at open.
func TestStepsPageAndSummaryFollowStatusChanges(t *testing.T) {
	db, path := openTemp(t)
	ctx := context.Background()
	job := newJob("j", "alpha", "build", 0)
	steps := []*engine.Step{newStep("j", "fan", 0)}
	for i := range 6 {
		in := newStep("j", fmt.Sprintf("fan[%d]", i), 1+i)
		in.FlowStep = "fan"
		steps = append(steps, in)
	}
	steps = append(steps, newStep("j", "after", 100))
	commit(t, db, &engine.Batch{Jobs: []*engine.Job{job}, Steps: steps})
	for _, i := range []int{1, 4} {
		steps[1+i].Status = engine.StepFailed
	}
	steps[0].Status = engine.StepRunning
	commit(t, db, &engine.Batch{Steps: []*engine.Step{steps[0], steps[2], steps[5]}})

	names := func(q engine.StepQuery) []string {
		t.Helper()
		page, err := db.StepsPage(ctx, "j", q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range page {
			out = append(out, s.Name)
		}
		return out
	}
	for _, tc := range []struct {
		q    engine.StepQuery
		want []string
	}{
		{engine.StepQuery{After: -1, Limit: 3}, []string{"fan", "fan[0]", "fan[1]"}},
		{engine.StepQuery{After: 2, Limit: 3}, []string{"fan[2]", "fan[3]", "fan[4]"}},
		{engine.StepQuery{After: -1, Limit: 10, FlowOnly: true}, []string{"fan", "after"}},
		{engine.StepQuery{After: -1, Limit: 10, Statuses: []string{engine.StepFailed, engine.StepRunning}}, []string{"fan", "fan[1]", "fan[4]"}},
		{engine.StepQuery{After: 2, Limit: 10, Statuses: []string{engine.StepFailed, engine.StepRunning}}, []string{"fan[4]"}},
		{engine.StepQuery{After: -1, Limit: 2, Statuses: []string{engine.StepPending}}, []string{"fan[0]", "fan[2]"}},
	} {
		if got := names(tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.q, got, tc.want)
		}
	}
	want := map[string]int{engine.StepPending: 5, engine.StepFailed: 2, engine.StepRunning: 1}
	if got, err := db.StepSummary(ctx, "j"); err != nil || !maps.Equal(got, want) {
		t.Errorf("summary = %v, %v; want %v", got, err, want)
	}
	assertCountsMatchIndexes(t, db)

	err := db.bolt.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketStepStatus); err != nil {
			return err
		}
		for st := range want {
			if err := tx.Bucket(bucketCounts).Delete(countStepStatus("j", st)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got, err := db.StepSummary(ctx, "j"); err != nil || !maps.Equal(got, want) {
		t.Errorf("summary after the rebuild = %v, %v; want %v", got, err, want)
	}
	if got := names(engine.StepQuery{After: -1, Limit: 10, Statuses: []string{engine.StepFailed}}); !slices.Equal(got, []string{"fan[1]", "fan[4]"}) {
		t.Errorf("failed steps after the rebuild = %v", got)
	}
}

// TestHasStepMatchesWholeNamesOfItsJobOnly finds a step by its whole name,
// not a prefix of it nor a step of a job whose id starts the same.
func TestHasStepMatchesWholeNamesOfItsJobOnly(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	in := newStep("j", "fan[1]", 1)
	in.FlowStep = "fan"
	commit(t, db, &engine.Batch{
		Jobs:  []*engine.Job{newJob("j", "alpha", "build", 0), newJob("j2", "alpha", "build", 1)},
		Steps: []*engine.Step{newStep("j", "fan", 0), in, newStep("j", "after", 2), newStep("j2", "other", 0)},
	})
	for name, want := range map[string]bool{"fan": true, "fan[1]": true, "after": true, "fan[2]": false, "fa": false, "afterwards": false, "other": false, "": false} {
		if got, err := db.HasStep(ctx, "j", name); err != nil || got != want {
			t.Errorf("HasStep(j, %q) = %v, %v; want %v", name, got, err, want)
		}
	}
	if got, err := db.HasStep(ctx, "j2", "other"); err != nil || !got {
		t.Errorf("HasStep(j2, other) = %v, %v; want true", got, err)
	}
	if got, err := db.HasStep(ctx, "missing", "fan"); err != nil || got {
		t.Errorf("HasStep of a missing job = %v, %v; want false", got, err)
	}
}
