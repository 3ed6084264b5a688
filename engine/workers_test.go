package engine_test

import (
	"slices"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

func TestSilentRemoteWorkerLosesItsSteps(t *testing.T) {
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}
c: {action: ok}`)), enginetest.Options{NoWorker: true, HeartbeatTimeout: 90 * time.Second})
	remote := f.Register("edge-1", nil, false)
	job := f.Execute("t", nil)
	c, err := f.Engine.Claim(t.Context(), remote, 0)
	if err != nil || c == nil || c.StepName != "a" {
		t.Fatalf("claim = %+v, %v", c, err)
	}
	if err := f.Engine.StartStep(t.Context(), remote, job, "a"); err != nil {
		t.Fatal(err)
	}

	// A heartbeat inside the window resets it.
	f.Clock.Advance(60 * time.Second)
	if err := f.Engine.Heartbeat(t.Context(), remote, nil); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(60 * time.Second)
	if s := f.Step(job, "a"); s.Status != engine.StepRunning {
		t.Fatalf("a is %s 60s after a heartbeat, want running", s.Status)
	}
	f.Clock.Advance(30 * time.Second)

	msg := "Worker heartbeat timeout (worker edge-1 unresponsive)"
	a := f.WaitStep(job, "a", engine.StepFailed)
	if deref(a.ErrorMessage) != msg {
		t.Errorf("a error_message = %q, want %q", deref(a.ErrorMessage), msg)
	}
	if s := f.Step(job, "b"); s.Status != engine.StepSkipped {
		t.Errorf("b is %s, want skipped after its dependency was lost", s.Status)
	}
	if s := f.Step(job, "c"); s.Status != engine.StepReady {
		t.Errorf("c is %s, want still ready for another worker", s.Status)
	}
	if lines, want := f.Logs.ServerLines(job), `step "a" failed: `+msg; !slices.Contains(lines, want) {
		t.Errorf("server lines = %q, want %q", lines, want)
	}
	w, _, _, err := f.Engine.Worker(t.Context(), remote)
	if err != nil || w.Status != engine.WorkerInactive {
		t.Fatalf("worker = %+v, %v; want inactive", w, err)
	}

	if err := f.Engine.Heartbeat(t.Context(), remote, nil); err != nil {
		t.Fatal(err)
	}
	if w, _, _, _ := f.Engine.Worker(t.Context(), remote); w.Status != engine.WorkerActive {
		t.Errorf("worker is %s after a heartbeat, want active again", w.Status)
	}
	if err := f.Engine.CompleteStep(t.Context(), remote, job, "a", enginetest.Ok(nil)); !errorsIs(err, engine.ErrConflict) {
		t.Errorf("late complete from the lost worker: err = %v, want ErrConflict", err)
	}
}

func TestInProcessWorkersNeverTimeOut(t *testing.T) {
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(`a: {action: ok}`)), enginetest.Options{HeartbeatTimeout: time.Minute})
	job := f.Execute("t", nil)
	claimAndStart(t, f, job, "a")
	f.Clock.Advance(time.Hour)
	if s := f.Step(job, "a"); s.Status != engine.StepRunning {
		t.Errorf("a is %s after an hour on an in-process worker, want running", s.Status)
	}
}

func TestWorkerQueriesListWorkersAndTheirSteps(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}`))
	job := f.Execute("t", nil)
	f.RunStep("a", enginetest.Ok(nil))
	f.RunStep("b", enginetest.Exit(1))
	f.WaitStatus(job, engine.JobFailed)

	ws, total, err := f.Engine.Workers(t.Context(), 0, 0)
	if err != nil || total != 1 || len(ws) != 1 || ws[0].Name != "fixture" || !ws[0].InProcess {
		t.Fatalf("workers = %+v, %d, %v", ws, total, err)
	}
	w, steps, n, err := f.Engine.Worker(t.Context(), f.Worker)
	if err != nil || w.ID != f.Worker || n != 2 || len(steps) != 2 {
		t.Fatalf("worker = %+v, %d steps (%d), %v", w, len(steps), n, err)
	}
	if steps[0].StepName != "b" || steps[0].Status != engine.StepFailed || steps[0].JobStatus != engine.JobFailed {
		t.Errorf("newest worker step = %+v, want b failed in a failed job", steps[0])
	}
	if _, _, _, err := f.Engine.Worker(t.Context(), "ghost"); !errorsIs(err, engine.ErrNotFound) {
		t.Errorf("unknown worker: err = %v, want ErrNotFound", err)
	}
}

func TestJobsListsNewestFirstWithTotals(t *testing.T) {
	f := enginetest.New(t, `
tasks:
  one:
    flow: {a: {type: script, script: "true"}}
  two:
    flow: {a: {type: script, script: "true"}}
`)
	var ids []string
	for _, task := range []string{"one", "two", "one", "one"} {
		ids = append(ids, f.Execute(task, nil))
	}
	cases := []struct {
		name   string
		filter engine.JobFilter
		want   []string
		total  int
	}{
		{"all", engine.JobFilter{}, []string{ids[3], ids[2], ids[1], ids[0]}, 4},
		{"by task", engine.JobFilter{Workspace: enginetest.WorkspaceName, TaskName: "one"}, []string{ids[3], ids[2], ids[0]}, 3},
		{"page", engine.JobFilter{Limit: 2, Offset: 1}, []string{ids[2], ids[1]}, 4},
		{"other workspace", engine.JobFilter{Workspace: "x"}, nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			jobs, total, err := f.Engine.Jobs(t.Context(), tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, j := range jobs {
				got = append(got, j.ID)
			}
			if !slices.Equal(got, tc.want) || total != tc.total {
				t.Errorf("jobs = %v (total %d), want %v (total %d)", got, total, tc.want, tc.total)
			}
		})
	}
	if _, _, err := f.Engine.Jobs(t.Context(), engine.JobFilter{TaskName: "one"}); !errorsIs(err, engine.ErrInvalid) {
		t.Errorf("task without workspace: err = %v, want ErrInvalid", err)
	}
}

// A claim whose answer never reached its worker is recovered from the
// worker's heartbeat, which names the steps it really runs.
func TestHeartbeatRecoversStepsTheWorkerNeverGot(t *testing.T) {
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(`
a: {action: ok}
b: {action: ok}
c: {action: ok}`)), enginetest.Options{NoWorker: true, HeartbeatTimeout: 90 * time.Second})
	remote := f.Register("edge-1", nil, false)
	job := f.Execute("t", nil)
	for i := 0; i < 3; i++ {
		if c, err := f.Engine.Claim(t.Context(), remote, 0); err != nil || c == nil {
			t.Fatalf("claim %d = %+v, %v", i, c, err)
		}
	}
	if err := f.Engine.StartStep(t.Context(), remote, job, "b"); err != nil {
		t.Fatal(err)
	}
	named := []engine.StepRef{{JobID: job, Step: "c"}}

	// Too soon after the claims: the answers may still be on their way.
	if err := f.Engine.Heartbeat(t.Context(), remote, named); err != nil {
		t.Fatal(err)
	}
	if got := f.StepStatuses(job); got["a"] != engine.StepRunning || got["b"] != engine.StepRunning {
		t.Fatalf("statuses right after the claims: %v", got)
	}

	// Without a list (an older worker) nothing is decided.
	f.Clock.Advance(31 * time.Second)
	if err := f.Engine.Heartbeat(t.Context(), remote, nil); err != nil {
		t.Fatal(err)
	}
	if got := f.StepStatuses(job); got["a"] != engine.StepRunning {
		t.Fatalf("statuses after a heartbeat without a list: %v", got)
	}

	if err := f.Engine.Heartbeat(t.Context(), remote, named); err != nil {
		t.Fatal(err)
	}
	a, b, c := f.Step(job, "a"), f.Step(job, "b"), f.Step(job, "c")
	if a.Status != engine.StepReady || a.WorkerID != nil {
		t.Errorf("a (claimed, never started, not named) = %s held by %v, want ready again", a.Status, a.WorkerID)
	}
	if b.Status != engine.StepFailed || deref(b.ErrorMessage) != "Worker edge-1 no longer runs this step" {
		t.Errorf("b (started, not named) = %s %q, want failed", b.Status, deref(b.ErrorMessage))
	}
	if c.Status != engine.StepRunning {
		t.Errorf("c (named) = %s, want still running", c.Status)
	}
	want := `step "a": worker edge-1 never received its claim; it is ready again`
	if lines := f.Logs.ServerLines(job); !slices.Contains(lines, want) {
		t.Errorf("server lines %q lack %q", lines, want)
	}
	if next, err := f.Engine.Claim(t.Context(), remote, 0); err != nil || next == nil || next.StepName != "a" {
		t.Fatalf("a is not claimable again: %+v %v", next, err)
	}
}

// WorkerFor answers as a caller who sees only some jobs: hidden steps are
// absent from the page and from the total, and the page stays full when
// the worker's newest steps are hidden ones.
func TestWorkerForCountsOnlyVisibleSteps(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}`))
	const runs = 60
	for range runs {
		job := f.Execute("t", nil)
		f.RunStep("a", enginetest.Ok(nil))
		f.WaitStatus(job, engine.JobCompleted)
	}
	if _, steps, n, err := f.Engine.WorkerFor(t.Context(), f.Worker, nil); err != nil || n != runs || len(steps) != 50 {
		t.Fatalf("unfiltered: %d steps of %d, %v; want 50 of %d", len(steps), n, err, runs)
	}
	if _, steps, n, err := f.Engine.WorkerFor(t.Context(), f.Worker, func(string, string) bool { return false }); err != nil || n != 0 || len(steps) != 0 {
		t.Fatalf("all hidden: %d steps of %d, %v; want none", len(steps), n, err)
	}
	// Every job is of one task, so a filter that hides every other step it
	// is asked about hides half: beyond the first page of 50, which holds
	// only 25 visible steps, the walk finds the other 5.
	calls := 0
	alternate := func(string, string) bool { calls++; return calls%2 == 0 }
	_, steps, n, err := f.Engine.WorkerFor(t.Context(), f.Worker, alternate)
	if err != nil || n != runs/2 || len(steps) != runs/2 {
		t.Fatalf("half hidden: %d steps of %d, %v; want %d of %d", len(steps), n, err, runs/2, runs/2)
	}
}
