package engine_test

import (
	"errors"
	"reflect"
	"strconv"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// rerun re-runs a job through CreateJob, as the API does, and makes the new
// job the fixture's last.
func rerun(f *enginetest.Fixture, old string, fromFailed bool, input map[string]any) (string, error) {
	j, err := f.Engine.CreateJob(f.T.(*testing.T).Context(), engine.CreateJob{
		Input:      input,
		Strict:     input != nil,
		SourceType: engine.SourceAPI,
		Rerun:      &engine.Rerun{JobID: old, FromFailed: fromFailed},
	})
	if err != nil {
		return "", err
	}
	f.LastJob = j.ID
	f.Settle()
	return j.ID, nil
}

// fanYAML is a task whose step fan runs one instance per item of its
// input `items`, a JSON list (items by default).
func fanYAML(items string) string {
	return `
actions:
  ok: {type: script, script: "true"}
tasks:
  t:
    input:
      items: {type: string, default: ` + strconv.Quote(items) + `}
    flow:
      fan: {action: ok, for_each: "{{ input.items }}"}
`
}

// layout is each step's status in a job, marked "+reused" when the record
// was taken over from old.
func layout(t *testing.T, f *enginetest.Fixture, job, old string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for name, s := range f.Steps(job) {
		m[name] = s.Status
		if s.ReusedFrom != "" {
			if s.ReusedFrom != old {
				t.Errorf("%s reused_from = %s, want %s", name, s.ReusedFrom, old)
			}
			m[name] += "+reused"
		}
	}
	return m
}

func TestRerunFromFailedLayout(t *testing.T) {
	cases := []struct {
		name string
		flow string
		// run takes the first job to its end.
		run  func(f *enginetest.Fixture, job string)
		want map[string]string // the re-run's steps right after creation
	}{
		{
			name: "chain with a failed middle step",
			flow: `
a: {action: ok}
b: {action: ok, depends_on: [a]}
c: {action: ok, depends_on: [b]}`,
			run: func(f *enginetest.Fixture, job string) {
				f.RunStep("a", enginetest.Ok(map[string]any{"v": "from-a"}))
				f.RunStep("b", enginetest.Fail(1, "boom"))
			},
			want: map[string]string{"a": "completed+reused", "b": "ready", "c": "pending"},
		},
		{
			name: "for_each with one failed instance",
			flow: `
fan: {action: ok, for_each: [x, y, z]}
after: {action: ok, depends_on: [fan]}`,
			run: func(f *enginetest.Fixture, job string) {
				f.RunStep("fan[0]", enginetest.Ok(map[string]any{"i": 0}))
				f.RunStep("fan[1]", enginetest.Fail(1, "bad item"))
				f.RunStep("fan[2]", enginetest.Ok(map[string]any{"i": 2}))
			},
			want: map[string]string{
				"fan": "running", "fan[0]": "completed+reused", "fan[1]": "ready", "fan[2]": "completed+reused",
				"after": "pending",
			},
		},
		{
			name: "sequential for_each passes over reused instances",
			flow: `
seq: {action: ok, for_each: [x, y, z], sequential: true}`,
			run: func(f *enginetest.Fixture, job string) {
				f.RunStep("seq[0]", enginetest.Fail(1, "first"))
				f.RunStep("seq[1]", enginetest.Ok(nil))
				f.RunStep("seq[2]", enginetest.Fail(1, "last"))
			},
			want: map[string]string{"seq": "running", "seq[0]": "ready", "seq[1]": "completed+reused", "seq[2]": "pending"},
		},
		{
			name: "cancelled job",
			flow: `
a: {action: ok}
b: {action: ok, depends_on: [a]}
c: {action: ok}`,
			run: func(f *enginetest.Fixture, job string) {
				f.RunStep("a", enginetest.Ok(nil))
				f.ClaimStep("b")
				if err := f.Engine.CancelJob(f.T.(*testing.T).Context(), job); err != nil {
					f.T.Fatal(err)
				}
			},
			want: map[string]string{"a": "completed+reused", "b": "ready", "c": "ready"},
		},
		{
			name: "a completed step downstream of a re-run one runs again",
			flow: `
a: {action: ok}
b: {action: ok, depends_on: [a], continue_on_failure: true}
c: {action: ok, depends_on: [b]}`,
			run: func(f *enginetest.Fixture, job string) {
				f.RunStep("a", enginetest.Fail(1, "flaky"))
				f.RunStep("b", enginetest.Ok(nil))
				f.RunStep("c", enginetest.Fail(1, "boom"))
			},
			want: map[string]string{"a": "ready", "b": "pending", "c": "pending"},
		},
		{
			name: "a job whose every step completed but one reuses them and finishes the last",
			flow: `
a: {action: ok}
b: {action: ok}`,
			run: func(f *enginetest.Fixture, job string) {
				f.RunStep("a", enginetest.Ok(map[string]any{"n": 1}))
				f.RunStep("b", enginetest.Fail(2, "no"))
			},
			want: map[string]string{"a": "completed+reused", "b": "ready"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := enginetest.New(t, flowYAML(tc.flow))
			old := f.Execute("t", nil)
			tc.run(f, old)
			oldJob := f.Job(old)
			if !engine.JobTerminal(oldJob.Status) {
				t.Fatalf("old job is %s", oldJob.Status)
			}
			job, err := rerun(f, old, true, nil)
			if err != nil {
				t.Fatalf("rerun: %v", err)
			}
			if got := layout(t, f, job, old); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("layout = %v\nwant     %v", got, tc.want)
			}
			j := f.Job(job)
			if j.RerunOf != old || j.Status != engine.JobPending {
				t.Errorf("job rerun_of = %q status = %s, want %s pending", j.RerunOf, j.Status, old)
			}
			// A reused record keeps the old output and times; the others run.
			oldSteps := f.Steps(old)
			for name, s := range f.Steps(job) {
				if s.ReusedFrom == "" {
					continue
				}
				o := oldSteps[name]
				if !reflect.DeepEqual(s.Output, o.Output) || !reflect.DeepEqual(s.CompletedAt, o.CompletedAt) || s.WorkerID != nil {
					t.Errorf("%s: output %v completed %v worker %v, want the old %v %v and no worker", name, s.Output, s.CompletedAt, s.WorkerID, o.Output, o.CompletedAt)
				}
			}
			for {
				var next string
				for name, s := range f.Steps(job) {
					// Ready, or claimed into the fixture's pocket on the way to another.
					if s.Status == engine.StepReady || s.Status == engine.StepRunning && s.WorkerID != nil {
						next = name
						break
					}
				}
				if next == "" {
					break
				}
				f.RunStep(next, enginetest.Ok(map[string]any{"rerun": true}))
			}
			if j := f.Job(job); j.Status != engine.JobCompleted {
				t.Fatalf("re-run is %s with steps %v", j.Status, layout(t, f, job, old))
			}
		})
	}
}

func TestRerunFromFailedAggregatesReusedInstanceOutputs(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
fan: {action: ok, for_each: [x, y]}`))
	old := f.Execute("t", nil)
	f.RunStep("fan[0]", enginetest.Ok(map[string]any{"i": "old"}))
	f.RunStep("fan[1]", enginetest.Fail(1, "bad"))
	job, err := rerun(f, old, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.RunStep("fan[1]", enginetest.Ok(map[string]any{"i": "new"}))
	j := f.WaitStatus(job, engine.JobCompleted)
	want := map[string]any{"fan": []any{map[string]any{"i": "old"}, map[string]any{"i": "new"}}}
	if !reflect.DeepEqual(j.Output, want) {
		t.Errorf("output = %v, want %v", j.Output, want)
	}
}

func TestRerunFromFailedReusesInstancesOnlyForEqualItems(t *testing.T) {
	f := enginetest.New(t, fanYAML("[1, 2, 3]"))
	old := f.Execute("t", nil)
	f.RunStep("fan[0]", enginetest.Ok(nil))
	f.RunStep("fan[1]", enginetest.Ok(nil))
	f.RunStep("fan[2]", enginetest.Fail(1, "bad"))
	// The list now differs at index 1: only index 0 keeps its item.
	job, err := rerun(f, old, true, map[string]any{"items": "[1, 5, 3, 4]"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"fan": "running", "fan[0]": "completed+reused", "fan[1]": "ready", "fan[2]": "ready", "fan[3]": "ready"}
	if got := layout(t, f, job, old); !reflect.DeepEqual(got, want) {
		t.Fatalf("layout = %v, want %v", got, want)
	}
}

func TestRerunErrors(t *testing.T) {
	f := enginetest.New(t, flowYAML(`a: {action: greet}`))
	done := f.Execute("t", nil)
	f.RunStep("a", enginetest.Ok(nil))
	f.WaitStatus(done, engine.JobCompleted)
	running := f.Execute("t", nil)

	cases := []struct {
		name       string
		job        string
		fromFailed bool
		input      map[string]any
		want       error
	}{
		{"from_failed on a completed job", done, true, nil, engine.ErrConflict},
		{"from_failed on a running job", running, true, nil, engine.ErrConflict},
		{"unknown job", "0190a0a0-0000-7000-8000-000000000000", false, nil, engine.ErrNotFound},
		{"unknown input key", done, false, map[string]any{"nmae": "x"}, engine.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rerun(f, tc.job, tc.fromFailed, tc.input)
			if !errorsIs(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestRerunTakesTheOldInputUnlessGiven(t *testing.T) {
	f := enginetest.New(t, `
actions:
  ok: {type: script, script: "true"}
tasks:
  t:
    input:
      name: {type: string, default: world}
    flow:
      a: {action: ok}
`)
	old := f.Execute("t", map[string]any{"name": "ann"})
	f.RunStep("a", enginetest.Ok(nil))
	f.WaitStatus(old, engine.JobCompleted)

	same, err := rerun(f, old, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if j := f.Job(same); j.Input["name"] != "ann" || j.RerunOf != old || j.TaskName != "t" {
		t.Errorf("re-run: input %v rerun_of %q task %q", j.Input, j.RerunOf, j.TaskName)
	}
	if got := layout(t, f, same, old); got["a"] != engine.StepReady {
		t.Errorf("a whole re-run reuses nothing: %v", got)
	}
	given, err := rerun(f, old, false, map[string]any{"name": "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if j := f.Job(given); j.Input["name"] != "bob" {
		t.Errorf("re-run with input: %v", j.Input)
	}
}

func TestRerunOfATaskNoLongerInTheWorkspaceConflicts(t *testing.T) {
	f := enginetest.New(t, flowYAML(`a: {action: ok}`))
	old := f.Execute("t", nil)
	f.RunStep("a", enginetest.Fail(1, "x"))
	f.Workspaces.Add(enginetest.LoadWorkspace(t, `
actions:
  ok: {type: script, script: "true"}
tasks:
  other:
    flow:
      a: {action: ok}
`))
	if _, err := rerun(f, old, true, nil); !errorsIs(err, engine.ErrConflict) {
		t.Fatalf("err = %v, want conflict", err)
	}
}

// The old job's instances to reuse live in memory until their step
// expands; a reload from the store in between (here after a failed commit,
// as at a restart) finds them again.
func TestRerunReusesForEachInstancesAfterAReload(t *testing.T) {
	f := enginetest.New(t, fanYAML(`["a", "b"]`))
	old := f.Execute("t", nil)
	f.RunStep("fan[0]", enginetest.Ok(map[string]any{"n": 0}))
	f.RunStep("fan[1]", enginetest.Fail(1, "bad"))

	failed := false
	f.Store.BeforeCommit(func(b *engine.Batch) {
		for _, s := range b.Steps {
			if s.JobID != old && s.Name == "fan[0]" && !failed {
				failed = true
				f.Store.FailNextCommit(errors.New("disk full"))
			}
		}
	})
	// The expansion must come in a commit after the job's: a render
	// result that comes back while the creation still waits for the
	// writer joins its batch, and the failed commit would be the
	// creation's. Held renders start only once the job is durable.
	release := f.Engine.HoldRenders()
	t.Cleanup(release)
	created, err := f.Engine.CreateJob(t.Context(), engine.CreateJob{
		SourceType: engine.SourceAPI,
		Rerun:      &engine.Rerun{JobID: old, FromFailed: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	job := created.ID
	f.LastJob = job
	release()
	f.Eventually(func() bool { return f.Steps(job)["fan[1]"] != nil }, func() string { return "fan never expanded" })
	if !failed {
		t.Fatal("the expansion's commit did not fail")
	}
	want := map[string]string{"fan": "running", "fan[0]": "completed+reused", "fan[1]": "ready"}
	if got := layout(t, f, job, old); !reflect.DeepEqual(got, want) {
		t.Fatalf("layout after the reload = %v, want %v", got, want)
	}
}

func TestRerunFromFailedResumesAfterARestart(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}
c: {action: ok, depends_on: [b]}`))
	old := f.Execute("t", nil)
	f.RunStep("a", enginetest.Ok(map[string]any{"v": 1}))
	f.RunStep("b", enginetest.Fail(1, "boom"))
	job, err := rerun(f, old, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Restart()
	want := map[string]string{"a": "completed+reused", "b": "ready", "c": "pending"}
	if got := layout(t, f, job, old); !reflect.DeepEqual(got, want) {
		t.Fatalf("layout after restart = %v, want %v", got, want)
	}
	f.RunStep("b", enginetest.Ok(nil))
	f.RunStep("c", enginetest.Ok(nil))
	if j := f.WaitStatus(job, engine.JobCompleted); j.RerunOf != old {
		t.Errorf("rerun_of = %q after restart", j.RerunOf)
	}
}
