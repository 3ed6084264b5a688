// Package storetest is one conformance suite for every implementation of
// the engine's Store port: what one backend does, all do.
// It must not import net/http, bbolt, store, api, app or runners.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

// Store is what the suite checks: the engine's port plus the scheduler's
// trigger state, which lives in the same store and commits with the jobs.
type Store interface {
	engine.Store
	LastFire(ws, trigger string) (time.Time, bool, error)
	SetLastFire(ws, trigger string, t time.Time) error
}

// Backend opens stores for the suite.
type Backend struct {
	// Open returns a new, empty store, closed by the test's cleanup.
	Open func(t *testing.T) Store
	// Reopen, for a durable backend, drops s as a crashed process would
	// and opens the same data again. Nil for a backend that keeps nothing
	// across a restart (the crash-restart cases are then skipped, saying so).
	Reopen func(t *testing.T, s Store) Store
	// Peer, if set, opens a second handle on s's data, as a second server
	// on the same database holds, closed by the test's cleanup. Nil: the
	// racing case races goroutines over s alone.
	Peer func(t *testing.T, s Store) Store
	// Sever, for a backend that talks to a server, ends every session s
	// holds on it at once, as a restart of the server or a cut network
	// does. Nil for a backend with no connection to cut (the case is then
	// skipped, saying so).
	Sever func(t *testing.T, s Store)
}

// t0 is the suite's epoch; records get times after it, in order.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
func ptr[T any](v T) *T    { return &v }

// Run runs every case of the suite against the backend.
func Run(t *testing.T, b Backend) {
	cases := []struct {
		name string
		run  func(t *testing.T, b Backend)
	}{
		{"JobRoundTrip", jobRoundTrip},
		{"UnknownRecordsAreNotFound", unknownRecords},
		{"StepsComeInSeqOrder", stepsInSeqOrder},
		{"JobsListNewestFirstWithFiltersAndTotals", jobsList},
		{"CursorPagesUnderVisibilityAndFilters", cursorPagesVisible},
		{"CountsFollowUpdates", countsFollowUpdates},
		{"LoadActiveReturnsLiveAndHookPendingJobs", loadActive},
		{"WorkersInRegistrationOrder", workersOrder},
		{"ClaimsListNewestFirstAndMoveWithTheStep", claims},
		{"TriggerFiresCommitWithTheBatch", triggerFires},
		{"EventMarksCommitWithTheBatch", eventMarks},
		{"AFailedCommitWritesNothing", failedCommitWritesNothing},
		{"EverythingSurvivesAReopen", survivesReopen},
		{"RacingCommitsApplyOneAfterTheOther", racingCommits},
		{"ABatchRefusedHalfWayWritesNothing", halfWayFailure},
		{"ACutConnectionLeavesNoHalfBatch", cutConnections},
		{"StepPagesAndSummaryFollowTheRecords", stepPages},
		{"AuditEntriesCommitWithTheBatchInOneChain", auditCommits},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, b) })
	}
}

func job(id, ws, task, status string, created int) *engine.Job {
	return &engine.Job{
		ID: id, Workspace: ws, TaskName: task, AccessPath: task, Mode: "distributed", Status: status,
		SourceType: engine.SourceAPI, Revision: "r1", Input: map[string]any{"k": "v", "n": 1.5},
		CreatedAt: at(created),
	}
}

func step(jobID, name string, seq int, status string) *engine.Step {
	return &engine.Step{
		JobID: jobID, Name: name, FlowStep: name, Index: -1, Seq: seq, ActionName: name,
		ActionType: "script", Runner: "local", Status: status, Input: map[string]any{"x": "y"},
	}
}

func worker(id string, registered int) *engine.Worker {
	return &engine.Worker{
		ID: id, Name: "w-" + id, Tags: []string{"linux"}, Status: engine.WorkerActive,
		LastSeen: at(registered), RegisteredAt: at(registered),
	}
}

func commit(t *testing.T, s Store, b *engine.Batch) {
	t.Helper()
	if err := s.Commit(context.Background(), b); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// same compares records by their JSON, the form every backend keeps.
func same(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

func ids(jobs []*engine.Job) []string {
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

func listJobs(t *testing.T, s Store, f engine.JobFilter) ([]string, int) {
	t.Helper()
	jobs, total, err := s.Jobs(context.Background(), f)
	if err != nil {
		t.Fatalf("jobs %+v: %v", f, err)
	}
	return ids(jobs), total
}

func jobRoundTrip(t *testing.T, b Backend) {
	s := b.Open(t)
	j := job("j1", "ws", "build", engine.JobPending, 0)
	j.SourceID = ptr("ws/nightly")
	j.Deadline = ptr(at(60))
	// A queued job's place is part of the record: a restart rebuilds the
	// lines from it (Engine.Load).
	j.Queue = &engine.JobQueue{Name: "deploys", Keyed: true, Key: "prod", Priority: -7, Waiting: true, Since: ptr(at(2)),
		Within: []string{"queue\x1fbuilds"}}
	commit(t, s, &engine.Batch{Jobs: []*engine.Job{j}})
	got, err := s.Job(context.Background(), "j1")
	if err != nil {
		t.Fatal(err)
	}
	same(t, "job read back", got, j)

	j.Status, j.StartedAt = engine.JobRunning, ptr(at(1))
	commit(t, s, &engine.Batch{Jobs: []*engine.Job{j}})
	got, _ = s.Job(context.Background(), "j1")
	same(t, "job after an update", got, j)

	// The store keeps no reference to what was committed.
	j.Status = engine.JobFailed
	got, _ = s.Job(context.Background(), "j1")
	if got.Status != engine.JobRunning {
		t.Errorf("a change to the committed record after Commit showed through: status %s", got.Status)
	}
}

func unknownRecords(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := context.Background()
	if _, err := s.Job(ctx, "nope"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("unknown job: %v, want ErrNotFound", err)
	}
	if _, err := s.Worker(ctx, "nope"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("unknown worker: %v, want ErrNotFound", err)
	}
	steps, err := s.Steps(ctx, "nope")
	if err != nil || len(steps) != 0 {
		t.Errorf("steps of an unknown job: %d, %v; want none and no error", len(steps), err)
	}
	if _, ok, err := s.LastFire("ws", "never"); ok || err != nil {
		t.Errorf("last fire of a trigger that never fired: %v, %v; want none", ok, err)
	}
	if ws, n, err := s.WorkerSteps(ctx, "nope", 10); len(ws) != 0 || n != 0 || err != nil {
		t.Errorf("claims of an unknown worker: %d (total %d), %v", len(ws), n, err)
	}
}

func stepsInSeqOrder(t *testing.T, b Backend) {
	s := b.Open(t)
	j := job("j1", "ws", "build", engine.JobPending, 0)
	// Committed out of order, and over two batches; names out of order too.
	c, a, bb := step("j1", "c", 2, engine.StepPending), step("j1", "a", 0, engine.StepReady), step("j1", "b", 1, engine.StepPending)
	commit(t, s, &engine.Batch{Jobs: []*engine.Job{j}, Steps: []*engine.Step{c, a}})
	commit(t, s, &engine.Batch{Steps: []*engine.Step{bb}})
	other := job("j2", "ws", "build", engine.JobPending, 1)
	commit(t, s, &engine.Batch{Jobs: []*engine.Job{other}, Steps: []*engine.Step{step("j2", "a", 0, engine.StepReady)}})

	a.Status, a.StartedAt = engine.StepRunning, ptr(at(3))
	commit(t, s, &engine.Batch{Steps: []*engine.Step{a}})
	got, err := s.Steps(context.Background(), "j1")
	if err != nil {
		t.Fatal(err)
	}
	same(t, "steps of j1", got, []*engine.Step{a, bb, c})
}

func jobsList(t *testing.T, b Backend) {
	s := b.Open(t)
	// Created in time order, committed out of it: the list follows time.
	commit(t, s, &engine.Batch{Jobs: []*engine.Job{
		job("j3", "ops", "deploy", engine.JobPending, 3),
		job("j1", "ops", "build", engine.JobCompleted, 1),
	}})
	commit(t, s, &engine.Batch{Jobs: []*engine.Job{
		job("j2", "dev", "build", engine.JobFailed, 2),
		job("j4", "ops", "build", engine.JobRunning, 4),
		job("j5", "dev", "build", engine.JobPending, 5),
	}})
	for _, tc := range []struct {
		f     engine.JobFilter
		want  []string
		total int
	}{
		{engine.JobFilter{Limit: 10}, []string{"j5", "j4", "j3", "j2", "j1"}, 5},
		{engine.JobFilter{Limit: 2}, []string{"j5", "j4"}, 5},
		{engine.JobFilter{Limit: 2, Offset: 2}, []string{"j3", "j2"}, 5},
		{engine.JobFilter{Limit: 2, Offset: 4}, []string{"j1"}, 5},
		{engine.JobFilter{Limit: 2, Offset: 9}, []string{}, 5},
		{engine.JobFilter{Workspace: "ops", Limit: 10}, []string{"j4", "j3", "j1"}, 3},
		{engine.JobFilter{Workspace: "ops", TaskName: "build", Limit: 10}, []string{"j4", "j1"}, 2},
		{engine.JobFilter{Workspace: "ops", TaskName: "build", Limit: 1, Offset: 1}, []string{"j1"}, 2},
		{engine.JobFilter{Workspace: "dev", TaskName: "deploy", Limit: 10}, []string{}, 0},
		{engine.JobFilter{Workspace: "nowhere", Limit: 10}, []string{}, 0},
	} {
		got, total := listJobs(t, s, tc.f)
		if !reflect.DeepEqual(got, tc.want) || total != tc.total {
			t.Errorf("jobs %+v = %v (total %d), want %v (total %d)", tc.f, got, total, tc.want, tc.total)
		}
	}
	// A limit of 0 means the default page, not an empty one.
	if got, _ := listJobs(t, s, engine.JobFilter{}); len(got) != 5 {
		t.Errorf("jobs with no limit = %v, want the five (a default page)", got)
	}
	// A task filter needs its workspace (task names are per workspace).
	if _, _, err := s.Jobs(context.Background(), engine.JobFilter{TaskName: "build", Limit: 10}); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("task filter without a workspace: %v, want ErrInvalid", err)
	}
	if _, _, err := s.Jobs(context.Background(), engine.JobFilter{Offset: -1, Limit: 10}); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("negative offset: %v, want ErrInvalid", err)
	}
}

// cursorPagesVisible walks cursor pages of job lists filtered by
// visibility (the ACL) with and without status, source and workspace
// filters: every page holds the next matching jobs newest first, none is
// repeated or skipped, pages stay full, and the total counts only the
// matching visible jobs. Some jobs share a creation time (the id breaks
// the tie). Visibility goes by the jobs' access paths: a job named like a
// visible task with a hidden path (a hook job of a hidden task) is hidden.
func cursorPagesVisible(t *testing.T, b Backend) {
	s := b.Open(t)
	statuses := []string{engine.JobPending, engine.JobRunning, engine.JobCompleted, engine.JobFailed}
	sources := []string{engine.SourceAPI, engine.SourceTrigger, engine.SourceWebhook}
	tasks := [][3]string{{"ops", "build", "build"}, {"ops", "secret", "secret"}, {"dev", "build", "build"}, {"dev", "hidden", "hidden"}, {"ops", "build", "secret/deploy"}}
	var all []*engine.Job
	for i := range 40 {
		wt := tasks[i%len(tasks)]
		j := job(fmt.Sprintf("j%02d", i), wt[0], wt[1], statuses[i%3], i/3) // three jobs per second
		j.AccessPath = wt[2]
		j.SourceType = sources[i%len(sources)]
		all = append(all, j)
	}
	commit(t, s, &engine.Batch{Jobs: all})
	hide := func(ws, path string) bool { return !strings.HasPrefix(path, "secret") && path != "hidden" }
	seeAll := func(ws, path string) bool { return true }
	// With nothing hidden a store may page another way (PostgreSQL merges
	// one range per status): each filter runs both ways.
	for _, visible := range []func(ws, path string) bool{hide, seeAll} {
		for _, f := range []engine.JobFilter{
			{},
			{Statuses: []string{engine.JobPending}},
			{Statuses: []string{engine.JobRunning, engine.JobCompleted}},
			{SourceType: engine.SourceTrigger},
			{Workspace: "ops"},
			{Workspace: "ops", TaskName: "secret"},
			{Workspace: "ops", TaskName: "build"},
			{Workspace: "dev", Statuses: []string{engine.JobPending, engine.JobCompleted}},
			{Workspace: "ops", SourceType: engine.SourceAPI},
			{Statuses: []string{engine.JobFailed}},
		} {
			f.Visible = visible
			var want []string
			for i := len(all) - 1; i >= 0; i-- { // newest first: time, then id
				j := all[i]
				if visible(j.Workspace, j.AccessPath) && (f.Workspace == "" || j.Workspace == f.Workspace) &&
					(f.TaskName == "" || j.TaskName == f.TaskName) && (f.SourceType == "" || j.SourceType == f.SourceType) &&
					(len(f.Statuses) == 0 || slices.Contains(f.Statuses, j.Status)) {
					want = append(want, j.ID)
				}
			}
			var got []string
			f.Limit = 3
			for pages := 0; ; pages++ {
				if pages > len(all) {
					t.Fatalf("%+v: the cursor pages do not end", f)
				}
				jobs, total, err := s.Jobs(context.Background(), f)
				if err != nil {
					t.Fatalf("jobs %+v: %v", f, err)
				}
				if total != len(want) {
					t.Errorf("%+v page %d: total %d, want %d", f, pages, total, len(want))
				}
				if len(jobs) < f.Limit && len(got)+len(jobs) < len(want) {
					t.Errorf("%+v page %d: %d jobs, a short page before the end", f, pages, len(jobs))
				}
				got = append(got, ids(jobs)...)
				if len(jobs) < f.Limit {
					break
				}
				cur, err := engine.ParseJobCursor(engine.CursorOf(jobs[len(jobs)-1]))
				if err != nil {
					t.Fatal(err)
				}
				f.Cursor = &cur
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%+v: cursor pages gave %v, want %v", f, got, want)
			}
		}
	}
}

func countsFollowUpdates(t *testing.T, b Backend) {
	s := b.Open(t)
	j := job("j1", "ops", "build", engine.JobPending, 1)
	commit(t, s, &engine.Batch{Jobs: []*engine.Job{j}})
	// Rewriting a job (status changes, the same record twice in a batch)
	// never counts it twice.
	for _, st := range []string{engine.JobRunning, engine.JobCompleted} {
		j.Status = st
		commit(t, s, &engine.Batch{Jobs: []*engine.Job{j, j}})
	}
	commit(t, s, &engine.Batch{Jobs: []*engine.Job{job("j2", "ops", "test", engine.JobPending, 2)}})
	for _, f := range []struct {
		f     engine.JobFilter
		total int
	}{
		{engine.JobFilter{Limit: 10}, 2},
		{engine.JobFilter{Workspace: "ops", Limit: 10}, 2},
		{engine.JobFilter{Workspace: "ops", TaskName: "build", Limit: 10}, 1},
		{engine.JobFilter{Workspace: "ops", TaskName: "test", Limit: 10}, 1},
	} {
		if got, total := listJobs(t, s, f.f); total != f.total || len(got) != f.total {
			t.Errorf("jobs %+v: %v, total %d; want %d", f.f, got, total, f.total)
		}
	}
	w := worker("w1", 0)
	commit(t, s, &engine.Batch{Workers: []*engine.Worker{w}})
	w.Status, w.LastSeen = engine.WorkerInactive, at(50)
	commit(t, s, &engine.Batch{Workers: []*engine.Worker{w}})
	if ws, total, err := s.Workers(context.Background(), 10, 0); err != nil || total != 1 || len(ws) != 1 {
		t.Errorf("workers after an update: %d, total %d, %v; want one", len(ws), total, err)
	}
}

func loadActive(t *testing.T, b Backend) {
	s := b.Open(t)
	live := job("live", "ws", "t", engine.JobRunning, 1)
	done := job("done", "ws", "t", engine.JobCompleted, 2)
	hooks := job("hooks", "ws", "t", engine.JobFailed, 3)
	hooks.HooksPending = true
	commit(t, s, &engine.Batch{
		Jobs:    []*engine.Job{live, done, hooks},
		Steps:   []*engine.Step{step("live", "a", 0, engine.StepRunning), step("done", "a", 0, engine.StepCompleted), step("hooks", "a", 0, engine.StepFailed)},
		Workers: []*engine.Worker{worker("w1", 0)},
	})
	// Hooks done: the job leaves the active set.
	hooks2 := *hooks
	hooks2.HooksPending = false
	ended := job("ended", "ws", "t", engine.JobRunning, 4)
	commit(t, s, &engine.Batch{Jobs: []*engine.Job{ended}})
	ended.Status = engine.JobCancelled
	commit(t, s, &engine.Batch{Jobs: []*engine.Job{ended}})

	jobs, steps, workers, err := s.LoadActive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, j := range jobs {
		got[j.ID] = true
	}
	if want := map[string]bool{"live": true, "hooks": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("active jobs %v, want %v", got, want)
	}
	stepsOf := map[string]int{}
	for _, st := range steps {
		stepsOf[st.JobID]++
	}
	if want := map[string]int{"live": 1, "hooks": 1}; !reflect.DeepEqual(stepsOf, want) {
		t.Errorf("active steps by job %v, want %v", stepsOf, want)
	}
	if len(workers) != 1 || workers[0].ID != "w1" {
		t.Errorf("workers %v, want w1", workers)
	}

	commit(t, s, &engine.Batch{Jobs: []*engine.Job{&hooks2}})
	jobs, _, _, _ = s.LoadActive(context.Background())
	if len(jobs) != 1 || jobs[0].ID != "live" {
		t.Errorf("after the hooks ran, active jobs %v, want [live]", ids(jobs))
	}
}

func workersOrder(t *testing.T, b Backend) {
	s := b.Open(t)
	commit(t, s, &engine.Batch{Workers: []*engine.Worker{worker("w1", 1), worker("w3", 3)}})
	commit(t, s, &engine.Batch{Workers: []*engine.Worker{worker("w2", 2)}})
	commit(t, s, &engine.Batch{Workers: []*engine.Worker{worker("w4", 4)}})
	var got []string
	ws, total, err := s.Workers(context.Background(), 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		got = append(got, w.ID)
	}
	if want := []string{"w2", "w3"}; !reflect.DeepEqual(got, want) || total != 4 {
		t.Errorf("workers page = %v (total %d), want %v (total 4)", got, total, want)
	}
	w, err := s.Worker(context.Background(), "w3")
	if err != nil {
		t.Fatal(err)
	}
	same(t, "worker read back", w, worker("w3", 3))
}

func claims(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := context.Background()
	j := job("j1", "ops", "build", engine.JobRunning, 0)
	var steps []*engine.Step
	for i, name := range []string{"a", "b", "c"} {
		st := step("j1", name, i, engine.StepRunning)
		st.WorkerID, st.ReadyAt, st.StartedAt = ptr("w1"), ptr(at(10+i)), ptr(at(20+i))
		steps = append(steps, st)
	}
	commit(t, s, &engine.Batch{Jobs: []*engine.Job{j}, Workers: []*engine.Worker{worker("w1", 0), worker("w2", 0)}, Steps: steps})

	got, total, err := s.WorkerSteps(ctx, "w1", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].StepName != "c" || got[1].StepName != "b" || total != 3 {
		t.Fatalf("claims of w1 = %+v (total %d), want c, b of 3", got, total)
	}
	same(t, "claim joined with its job", got[0], &engine.WorkerStep{
		JobID: "j1", Workspace: "ops", TaskName: "build", AccessPath: "build", JobStatus: engine.JobRunning,
		StepName: "c", ActionType: "script", Status: engine.StepRunning, StartedAt: ptr(at(22)),
	})
	if got, _, _ := s.WorkerSteps(ctx, "w1", 0); len(got) != 3 {
		t.Errorf("claims with no limit: %d, want all 3 (a default page)", len(got))
	}

	// w1 is lost; b is recovered and claimed again by w2: it moves.
	b2 := steps[1]
	b2.Status, b2.WorkerID, b2.ReadyAt, b2.StartedAt = engine.StepRunning, ptr("w2"), ptr(at(30)), ptr(at(31))
	commit(t, s, &engine.Batch{Steps: []*engine.Step{b2}})
	if got, total, _ := s.WorkerSteps(ctx, "w1", 10); len(got) != 2 || total != 2 {
		t.Errorf("w1 after b moved: %d claims (total %d), want 2", len(got), total)
	}
	if got, total, _ := s.WorkerSteps(ctx, "w2", 10); len(got) != 1 || total != 1 || got[0].StepName != "b" {
		t.Errorf("w2 after b moved: %+v (total %d), want b", got, total)
	}
	// Ending a step keeps it in its holder's list.
	b2.Status, b2.CompletedAt = engine.StepCompleted, ptr(at(40))
	commit(t, s, &engine.Batch{Steps: []*engine.Step{b2}})
	if got, total, _ := s.WorkerSteps(ctx, "w2", 10); len(got) != 1 || total != 1 || got[0].Status != engine.StepCompleted {
		t.Errorf("w2 after b completed: %+v (total %d), want b completed", got, total)
	}
}

func triggerFires(t *testing.T, b Backend) {
	s := b.Open(t)
	commit(t, s, &engine.Batch{
		Jobs:  []*engine.Job{job("j1", "ops", "nightly", engine.JobPending, 0)},
		Fires: []engine.TriggerFire{{Workspace: "ops", Trigger: "nightly", At: at(5).In(time.FixedZone("x", 3600))}},
	})
	last, ok, err := s.LastFire("ops", "nightly")
	if err != nil || !ok || !last.Equal(at(5)) || last.Location() != time.UTC {
		t.Errorf("last fire = %v %v %v, want %v in UTC", last, ok, err, at(5))
	}
	if err := s.SetLastFire("ops", "nightly", at(9)); err != nil {
		t.Fatal(err)
	}
	if last, _, _ := s.LastFire("ops", "nightly"); !last.Equal(at(9)) {
		t.Errorf("after SetLastFire: %v, want %v", last, at(9))
	}
	// Fires of other triggers and workspaces are their own.
	commit(t, s, &engine.Batch{Fires: []engine.TriggerFire{{Workspace: "dev", Trigger: "nightly", At: at(7)}}})
	if last, _, _ := s.LastFire("ops", "nightly"); !last.Equal(at(9)) {
		t.Errorf("another workspace's fire changed ops/nightly: %v", last)
	}
	// Nanoseconds survive: a fire time is compared against cron slots.
	commit(t, s, &engine.Batch{Fires: []engine.TriggerFire{{Workspace: "dev", Trigger: "nightly", At: at(7).Add(123456789)}}})
	if last, _, _ := s.LastFire("dev", "nightly"); !last.Equal(at(7).Add(123456789)) {
		t.Errorf("fire time lost precision: %v", last)
	}
	if err := s.SetLastFire("", "x", at(1)); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("SetLastFire without a workspace: %v, want ErrInvalid", err)
	}
}

// eventMarks: a backend that keeps event sources' progress
// (engine.EventStore) writes a batch's marks with its jobs, the batch's
// last mark of a step wins, a failed commit writes none, and they survive
// a reopen. One that keeps none leaves them to the engine's memory.
func eventMarks(t *testing.T, b Backend) {
	s := b.Open(t)
	es, ok := s.(engine.EventStore)
	if !ok {
		t.Skip("this backend keeps no event marks (engine.EventStore): the engine holds them in memory")
	}
	ctx := context.Background()
	mark := func(what, jobID, step, wantRun string, wantSeq int64) {
		t.Helper()
		run, seq, err := es.EventMark(ctx, jobID, step)
		if err != nil || run != wantRun || seq != wantSeq {
			t.Errorf("%s: mark of %s/%s = %q %d (%v), want %q %d", what, jobID, step, run, seq, err, wantRun, wantSeq)
		}
	}
	consumed := func(what, source string, want int64) {
		t.Helper()
		if n, err := es.EventsConsumed(ctx, source); err != nil || n != want {
			t.Errorf("%s: %s consumed %d (%v), want %d", what, source, n, err, want)
		}
	}
	mark("none yet", "c1", "read", "", 0)
	consumed("none yet", "ops/inbox", 0)
	commit(t, s, &engine.Batch{
		Jobs: []*engine.Job{job("e1", "ops", "handle", engine.JobPending, 1), job("e2", "ops", "handle", engine.JobPending, 2)},
		EventMarks: []engine.EventMark{
			{Source: "ops/inbox", JobID: "c1", Step: "read", Run: "r1", Seq: 1, Consumed: 1},
			{Source: "ops/inbox", JobID: "c1", Step: "read", Run: "r1", Seq: 2, Consumed: 2},
		},
	})
	mark("after a commit", "c1", "read", "r1", 2)
	consumed("after a commit", "ops/inbox", 2)
	mark("another step", "c1", "other", "", 0)
	consumed("another source", "ops/other", 0)
	// A failed commit writes neither its jobs nor its marks.
	err := s.Commit(ctx, &engine.Batch{
		Jobs:       []*engine.Job{job("e3", "ops", "handle", engine.JobPending, 3)},
		Fires:      []engine.TriggerFire{{Workspace: "ops", Trigger: "", At: at(3)}},
		EventMarks: []engine.EventMark{{Source: "ops/inbox", JobID: "c1", Step: "read", Run: "r1", Seq: 3, Consumed: 3}},
	})
	if !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("commit with a bad fire: %v, want ErrInvalid", err)
	}
	mark("after a failed commit", "c1", "read", "r1", 2)
	consumed("after a failed commit", "ops/inbox", 2)
	// A new run of the step starts its numbering afresh.
	commit(t, s, &engine.Batch{EventMarks: []engine.EventMark{{Source: "ops/inbox", JobID: "c1", Step: "read", Run: "r2", Seq: 1, Consumed: 3}}})
	mark("a new run", "c1", "read", "r2", 1)
	if b.Reopen == nil {
		return
	}
	s = b.Reopen(t, s)
	if es, ok = s.(engine.EventStore); !ok {
		t.Fatal("the reopened store keeps no event marks")
	}
	mark("after reopen", "c1", "read", "r2", 1)
	consumed("after reopen", "ops/inbox", 3)
}

func failedCommitWritesNothing(t *testing.T, b Backend) {
	s := b.Open(t)
	// A batch with one bad record (a fire without a trigger name) writes
	// none of its records.
	err := s.Commit(context.Background(), &engine.Batch{
		Jobs:  []*engine.Job{job("j1", "ops", "nightly", engine.JobPending, 0)},
		Steps: []*engine.Step{step("j1", "a", 0, engine.StepReady)},
		Fires: []engine.TriggerFire{{Workspace: "ops", Trigger: "", At: at(1)}},
	})
	if !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("commit with a bad fire: %v, want ErrInvalid", err)
	}
	if _, err := s.Job(context.Background(), "j1"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("the job of a failed commit was written: %v", err)
	}
	if steps, _ := s.Steps(context.Background(), "j1"); len(steps) != 0 {
		t.Errorf("the steps of a failed commit were written: %d", len(steps))
	}
	if _, total := listJobs(t, s, engine.JobFilter{Limit: 10}); total != 0 {
		t.Errorf("a failed commit counted a job: total %d", total)
	}
}

func survivesReopen(t *testing.T, b Backend) {
	if b.Reopen == nil {
		t.Skip("this backend keeps nothing across a restart (not durable by design)")
	}
	s := b.Open(t)
	live := job("live", "ops", "build", engine.JobRunning, 1)
	done := job("done", "ops", "test", engine.JobCompleted, 2)
	st := step("live", "a", 0, engine.StepRunning)
	st.WorkerID, st.ReadyAt = ptr("w1"), ptr(at(3))
	commit(t, s, &engine.Batch{
		Jobs: []*engine.Job{live, done}, Steps: []*engine.Step{st}, Workers: []*engine.Worker{worker("w1", 0)},
		Fires: []engine.TriggerFire{{Workspace: "ops", Trigger: "nightly", At: at(4)}},
	})
	s = b.Reopen(t, s)
	ctx := context.Background()
	got, err := s.Job(ctx, "live")
	if err != nil {
		t.Fatal(err)
	}
	same(t, "job after reopen", got, live)
	steps, _ := s.Steps(ctx, "live")
	same(t, "steps after reopen", steps, []*engine.Step{st})
	if jobs, total := listJobs(t, s, engine.JobFilter{Workspace: "ops", Limit: 10}); total != 2 || fmt.Sprint(jobs) != "[done live]" {
		t.Errorf("jobs after reopen %v (total %d), want [done live] of 2", jobs, total)
	}
	active, _, workers, err := s.LoadActive(ctx)
	if err != nil || len(active) != 1 || active[0].ID != "live" || len(workers) != 1 {
		t.Errorf("load active after reopen: %v jobs, %d workers, %v", ids(active), len(workers), err)
	}
	if ws, total, _ := s.WorkerSteps(ctx, "w1", 10); len(ws) != 1 || total != 1 {
		t.Errorf("claims after reopen: %d (total %d), want 1", len(ws), total)
	}
	if last, ok, _ := s.LastFire("ops", "nightly"); !ok || !last.Equal(at(4)) {
		t.Errorf("last fire after reopen %v (%v), want %v", last, ok, at(4))
	}
	// And it still takes writes.
	commit(t, s, &engine.Batch{Jobs: []*engine.Job{job("new", "ops", "build", engine.JobPending, 5)}})
	if _, total := listJobs(t, s, engine.JobFilter{Limit: 10}); total != 3 {
		t.Errorf("after reopen and a commit, total %d, want 3", total)
	}
}
