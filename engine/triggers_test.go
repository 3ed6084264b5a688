package engine_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

const triggerYAML = `
actions:
  notify:
    type: script
    input:
      message: {type: string}
    script: echo {{ input.message }}
tasks:
  work:
    input:
      n: {type: integer, default: 1}
    flow:
      run: {type: script, script: "true"}
on_success:
  - action: notify
    input: {message: "ok {{ hook.job_id }}"}
on_error:
  - action: notify
    input: {message: "{{ hook.status }} {{ hook.job_id }}"}
`

// triggered creates a job of task work from source (type, id) under a policy.
func triggered(t *testing.T, f *enginetest.Fixture, sourceType, source, concurrency string) *engine.Job {
	t.Helper()
	j, err := f.Engine.CreateTriggered(t.Context(), engine.CreateJob{
		Workspace: enginetest.WorkspaceName, Task: "work", SourceType: sourceType, SourceID: &source,
	}, concurrency)
	if err != nil {
		t.Fatalf("create triggered (%s): %v", concurrency, err)
	}
	return j
}

func TestTriggeredJobsFollowTheConcurrencyPolicy(t *testing.T) {
	const src = "main/nightly"
	tests := []struct {
		name        string
		concurrency string
		// before creates the earlier jobs; the ones returned are live.
		before      func(t *testing.T, f *enginetest.Fixture) []string
		wantNew     string // status of the new job
		wantSteps   int    // step records of the new job
		wantBefore  string // status of each earlier live job afterwards
		wantHooksOf int    // hook jobs fired for each earlier live job
	}{
		{
			name:        "allow runs beside a live run",
			concurrency: engine.ConcurrencyAllow,
			before:      liveRuns(engine.SourceTrigger, src, 1),
			wantNew:     engine.JobPending, wantSteps: 1, wantBefore: engine.JobPending,
		},
		{
			name:        "empty policy means allow",
			concurrency: "",
			before:      liveRuns(engine.SourceTrigger, src, 1),
			wantNew:     engine.JobPending, wantSteps: 1, wantBefore: engine.JobPending,
		},
		{
			name:        "skip records a skipped job while a run is live",
			concurrency: engine.ConcurrencySkip,
			before:      liveRuns(engine.SourceTrigger, src, 1),
			wantNew:     engine.JobSkipped, wantSteps: 0, wantBefore: engine.JobPending,
		},
		{
			name:        "skip runs when the earlier run has ended",
			concurrency: engine.ConcurrencySkip,
			before: func(t *testing.T, f *enginetest.Fixture) []string {
				j := triggered(t, f, engine.SourceTrigger, src, engine.ConcurrencyAllow)
				f.RunJobStep(j.ID, "run", enginetest.Ok(nil))
				f.WaitStatus(j.ID, engine.JobCompleted)
				return nil
			},
			wantNew: engine.JobPending, wantSteps: 1,
		},
		{
			name:        "skip ignores live runs of another trigger",
			concurrency: engine.ConcurrencySkip,
			before:      liveRuns(engine.SourceTrigger, "main/other", 1),
			wantNew:     engine.JobPending, wantSteps: 1, wantBefore: engine.JobPending,
		},
		{
			name:        "skip ignores a webhook with the same source id",
			concurrency: engine.ConcurrencySkip,
			before:      liveRuns(engine.SourceWebhook, src, 1),
			wantNew:     engine.JobPending, wantSteps: 1, wantBefore: engine.JobPending,
		},
		{
			name:        "cancel_previous cancels every live run first",
			concurrency: engine.ConcurrencyCancelPrevious,
			before:      liveRuns(engine.SourceTrigger, src, 2),
			wantNew:     engine.JobPending, wantSteps: 1, wantBefore: engine.JobCancelled, wantHooksOf: 1,
		},
		{
			name:        "cancel_previous with nothing live just runs",
			concurrency: engine.ConcurrencyCancelPrevious,
			before:      func(*testing.T, *enginetest.Fixture) []string { return nil },
			wantNew:     engine.JobPending, wantSteps: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := enginetest.New(t, triggerYAML)
			earlier := tt.before(t, f)
			j := triggered(t, f, engine.SourceTrigger, src, tt.concurrency)

			got := f.Job(j.ID)
			if got.Status != tt.wantNew || j.Status != tt.wantNew {
				t.Fatalf("new job is %s (returned %s), want %s", got.Status, j.Status, tt.wantNew)
			}
			if got.SourceType != engine.SourceTrigger || deref(got.SourceID) != src {
				t.Errorf("new job source = %s %s, want trigger %s", got.SourceType, deref(got.SourceID), src)
			}
			if n := len(f.Steps(j.ID)); n != tt.wantSteps {
				t.Errorf("new job has %d step records, want %d", n, tt.wantSteps)
			}
			for _, id := range earlier {
				if s := f.Job(id).Status; s != tt.wantBefore {
					t.Errorf("earlier job %s is %s, want %s", id, s, tt.wantBefore)
				}
				if n := len(hookJobs(t, f, id)); n != tt.wantHooksOf {
					t.Errorf("earlier job %s fired %d hook jobs, want %d", id, n, tt.wantHooksOf)
				}
			}
			if tt.wantBefore == engine.JobCancelled {
				lines := strings.Join(f.Logs.ServerLines(earlier[0]), "\n")
				if !strings.Contains(lines, "cancelled by a newer run of trigger "+src) {
					t.Errorf("cancelled job's log does not say why: %q", lines)
				}
			}
		})
	}
}

// liveRuns returns a before func that creates n pending jobs of a source.
func liveRuns(sourceType, source string, n int) func(t *testing.T, f *enginetest.Fixture) []string {
	return func(t *testing.T, f *enginetest.Fixture) []string {
		var ids []string
		for range n {
			ids = append(ids, triggered(t, f, sourceType, source, engine.ConcurrencyAllow).ID)
		}
		return ids
	}
}

func TestSkippedJobIsTerminalWithoutHooksOrSteps(t *testing.T) {
	f := enginetest.New(t, triggerYAML)
	running := triggered(t, f, engine.SourceTrigger, "main/t", engine.ConcurrencyAllow)
	skipped := triggered(t, f, engine.SourceTrigger, "main/t", engine.ConcurrencySkip)

	j := f.Job(skipped.ID)
	if !j.Terminal() || j.CompletedAt == nil || j.StartedAt != nil {
		t.Fatalf("skipped job: terminal=%v completed_at=%v started_at=%v", j.Terminal(), j.CompletedAt, j.StartedAt)
	}
	if j.Input["n"] != float64(1) {
		t.Errorf("skipped job input = %v, want the task's defaults applied", j.Input)
	}
	done, err := f.Engine.JobDone(t.Context(), skipped.ID)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	default:
		t.Error("JobDone of a skipped job is not closed")
	}
	if n := len(hookJobs(t, f, skipped.ID)); n != 0 {
		t.Errorf("skipped job fired %d hook jobs, want none", n)
	}
	lines := strings.Join(f.Logs.ServerLines(skipped.ID), "\n")
	if !strings.Contains(lines, "skipped: job "+running.ID) {
		t.Errorf("skipped job's log does not name the live run: %q", lines)
	}
	if f.Logs.Finished(skipped.ID) != 1 {
		t.Errorf("skipped job's log was finished %d times, want once", f.Logs.Finished(skipped.ID))
	}

	// The skipped record is not live: once the running job ends, the next
	// skip-policy run starts normally.
	f.RunJobStep(running.ID, "run", enginetest.Ok(nil))
	f.WaitStatus(running.ID, engine.JobCompleted)
	next := triggered(t, f, engine.SourceTrigger, "main/t", engine.ConcurrencySkip)
	if next.Status != engine.JobPending {
		t.Errorf("run after the live one ended is %s, want pending", next.Status)
	}
}

func TestConcurrentSkipRunsStartExactlyOneJob(t *testing.T) {
	f := enginetest.New(t, triggerYAML)
	const n = 32
	statuses := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			src := "main/burst"
			j, err := f.Engine.CreateTriggered(t.Context(), engine.CreateJob{
				Workspace: enginetest.WorkspaceName, Task: "work", SourceType: engine.SourceTrigger, SourceID: &src,
			}, engine.ConcurrencySkip)
			if err != nil {
				t.Errorf("create: %v", err)
				return
			}
			statuses[i] = j.Status
		})
	}
	wg.Wait()
	count := map[string]int{}
	for _, s := range statuses {
		count[s]++
	}
	if count[engine.JobPending] != 1 || count[engine.JobSkipped] != n-1 {
		t.Fatalf("statuses = %v, want 1 pending and %d skipped", count, n-1)
	}
}

func TestCreateTriggeredRefusesBadRequests(t *testing.T) {
	f := enginetest.New(t, triggerYAML)
	src := "main/t"
	tests := []struct {
		name        string
		req         engine.CreateJob
		concurrency string
		want        string
	}{
		{"api source", engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "work", SourceType: engine.SourceAPI, SourceID: &src}, "allow", "source type"},
		{"no source id", engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "work", SourceType: engine.SourceTrigger}, "allow", "source id"},
		{"unknown policy", engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "work", SourceType: engine.SourceTrigger, SourceID: &src}, "queue", `unknown concurrency "queue"`},
		{"bad input", engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "work", SourceType: engine.SourceTrigger, SourceID: &src, Input: map[string]any{"n": "many"}}, "skip", "n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.Engine.CreateTriggered(t.Context(), tt.req, tt.concurrency)
			if !errorsIs(err, engine.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrInvalid mentioning %q", err, tt.want)
			}
		})
	}
	if _, err := f.Engine.CreateTriggered(t.Context(), engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "nope", SourceType: engine.SourceWebhook, SourceID: &src}, "allow"); !errorsIs(err, engine.ErrNotFound) {
		t.Errorf("unknown task: err = %v, want ErrNotFound", err)
	}
}
