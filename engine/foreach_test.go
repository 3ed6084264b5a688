package engine_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

func TestForEachParallelAggregatesOutputsInIndexOrder(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
fan:
  action: greet
  for_each: ["ann", "bob", "cy"]
  input:
    name: "{{ each.item }}-{{ each.index }}"
after: {action: ok, depends_on: [fan]}`))
	job := f.Execute("t", nil)

	// Every instance is ready at once; finish them out of order.
	for _, i := range []int{2, 0, 1} {
		c := f.RunStep(fmt.Sprintf("fan[%d]", i), enginetest.Ok(map[string]any{"i": i}))
		if want := fmt.Sprintf("echo hello '%s-%d'", []string{"ann", "bob", "cy"}[i], i); c.Spec.Script != want {
			t.Errorf("fan[%d] script = %q, want %q", i, c.Spec.Script, want)
		}
	}
	fan := f.WaitStep(job, "fan", engine.StepCompleted)
	want := []any{map[string]any{"i": 0.0}, map[string]any{"i": 1.0}, map[string]any{"i": 2.0}}
	if !reflect.DeepEqual(fan.Output, want) {
		t.Errorf("fan output = %v, want %v", fan.Output, want)
	}
	f.RunStep("after", enginetest.Ok(nil))
	f.WaitStatus(job, engine.JobCompleted)
}

func TestForEachSequentialRunsOneInstanceAtATime(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
seq:
  action: ok
  for_each: [a, b, c]
  sequential: true`))
	job := f.Execute("t", nil)
	for i := range 3 {
		for j := i + 1; j < 3; j++ {
			if s := f.Step(job, fmt.Sprintf("seq[%d]", j)); s.Status != engine.StepPending {
				t.Fatalf("seq[%d] is %s while seq[%d] runs, want pending", j, s.Status, i)
			}
		}
		res := enginetest.Ok(map[string]any{"n": i})
		if i == 1 {
			res = enginetest.Exit(1) // a failed instance does not stop the next
		}
		f.RunStep(fmt.Sprintf("seq[%d]", i), res)
	}
	f.WaitStatus(job, engine.JobFailed)
	p := f.Step(job, "seq")
	if p.Status != engine.StepFailed || p.ErrorMessage == nil || *p.ErrorMessage != "1 of 3 for_each instances failed" {
		t.Errorf("parent = %s %v", p.Status, p.ErrorMessage)
	}
	want := []any{map[string]any{"n": 0.0}, nil, map[string]any{"n": 2.0}}
	if !reflect.DeepEqual(p.Output, want) {
		t.Errorf("parent output = %v, want %v (null for the failed instance)", p.Output, want)
	}
}

func TestForEachFailingInstanceFailsParentAndSkipsDependents(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
fan: {action: ok, for_each: [1, 2]}
after: {action: ok, depends_on: [fan]}`))
	job := f.Execute("t", nil)
	f.RunStep("fan[0]", enginetest.Ok(nil))
	f.RunStep("fan[1]", enginetest.Fail(1, "bad item"))
	f.WaitStatus(job, engine.JobFailed)
	if got := f.StepStatuses(job); got["fan"] != "failed" || got["after"] != "skipped" || got["fan[0]"] != "completed" {
		t.Errorf("statuses = %v", got)
	}
}

func TestForEachFromUpstreamOutputTemplate(t *testing.T) {
	cases := []struct {
		name  string
		expr  string
		out   map[string]any
		items []string
	}{
		{"list value", "{{ a.output.hosts }}", map[string]any{"hosts": []any{"h1", "h2"}}, []string{"h1", "h2"}},
		{"json string of a list", "{{ a.output.hosts }}", map[string]any{"hosts": `["x","y","z"]`}, []string{"x", "y", "z"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := enginetest.New(t, flowYAML(`
a: {action: ok}
b:
  action: greet
  depends_on: [a]
  for_each: "`+tc.expr+`"
  input: {name: "{{ each.item }}"}`))
			job := f.Execute("t", nil)
			f.RunStep("a", enginetest.Ok(tc.out))
			for i, item := range tc.items {
				c := f.RunStep(fmt.Sprintf("b[%d]", i), enginetest.Ok(nil))
				if c.Input["name"] != item {
					t.Errorf("b[%d] input name = %v, want %s", i, c.Input["name"], item)
				}
			}
			f.WaitStatus(job, engine.JobCompleted)
			if n := len(f.Steps(job)); n != 2+len(tc.items) {
				t.Errorf("job has %d step records, want %d", n, 2+len(tc.items))
			}
		})
	}
}

func TestForEachEdgeCases(t *testing.T) {
	big := make([]string, 10001)
	for i := range big {
		big[i] = "1"
	}
	cases := []struct {
		name    string
		forEach string
		status  string
		errPart string
	}{
		{"empty list completes with empty output", "[]", engine.StepCompleted, ""},
		{"template yielding a non-list fails", `"{{ input }}"`, engine.StepFailed, "not a list"},
		{"more than 10000 items fails", "[" + strings.Join(big, ",") + "]", engine.StepFailed, "10001 items exceed the limit of 10000"},
		{"template error fails", `"{{ nope }}"`, engine.StepFailed, "for_each"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := enginetest.New(t, flowYAML("fan: {action: ok, for_each: "+tc.forEach+"}"))
			job := f.Execute("t", nil)
			s := f.WaitStep(job, "fan", tc.status)
			if tc.errPart != "" && (s.ErrorMessage == nil || !strings.Contains(*s.ErrorMessage, tc.errPart)) {
				t.Errorf("error_message = %s, want it to contain %q", deref(s.ErrorMessage), tc.errPart)
			}
			if tc.status == engine.StepCompleted && !reflect.DeepEqual(s.Output, []any{}) {
				t.Errorf("output = %#v, want []", s.Output)
			}
		})
	}
}

// TestForEachAggregateNullsFailedInOrder finishes instances in reverse
// order, some failing: the parent ends only with the last one, and its
// output lists every instance in index order, null where one failed.
func TestForEachAggregateNullsFailedInOrder(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
fan:
  action: ok
  for_each: [0, 1, 2, 3, 4]
after: {action: ok, depends_on: [fan], continue_on_failure: true}`))
	job := f.Execute("t", nil)
	for i := 4; i >= 0; i-- {
		if s := f.Step(job, "fan"); s.Status != engine.StepRunning {
			t.Fatalf("fan is %s with fan[%d] still to end, want running", s.Status, i)
		}
		res := enginetest.Ok(map[string]any{"i": i})
		if i%2 == 1 {
			res = enginetest.Exit(1)
		}
		f.RunStep(fmt.Sprintf("fan[%d]", i), res)
	}
	fan := f.WaitStep(job, "fan", engine.StepFailed)
	want := []any{map[string]any{"i": 0.0}, nil, map[string]any{"i": 2.0}, nil, map[string]any{"i": 4.0}}
	if !reflect.DeepEqual(fan.Output, want) {
		t.Errorf("fan output = %#v, want %#v", fan.Output, want)
	}
	if fan.ErrorMessage == nil || *fan.ErrorMessage != "2 of 5 for_each instances failed" {
		t.Errorf("fan error = %v", fan.ErrorMessage)
	}
	f.RunStep("after", enginetest.Ok(nil))
	f.WaitStatus(job, engine.JobFailed)
}
