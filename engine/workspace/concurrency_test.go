package workspace

import (
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine/workflow"
)

func TestTaskConcurrencyLoads(t *testing.T) {
	ws, errs := loadMain(t, `
		tasks:
		  deploy:
		    concurrency: {limit: 1, key: "{{ input.env }}", on_limit: cancel_previous, priority: "{{ input.priority }}"}
		    flow: {s: {script: echo}}
		  plain:
		    concurrency: {limit: 3, priority: 7}
		    flow: {s: {script: echo}}
		`)
	if errs != nil {
		t.Fatal(errs)
	}
	got := ws.Tasks["deploy"].Concurrency
	want := workflow.Concurrency{Limit: 1, Key: "{{ input.env }}", OnLimit: workflow.OnLimitCancelPrevious, Priority: "{{ input.priority }}"}
	if got == nil || *got != want {
		t.Fatalf("deploy concurrency = %+v, want %+v", got, want)
	}
	if c := ws.Tasks["plain"].Concurrency; c.OnLimit != workflow.OnLimitQueue || c.Priority != "7" || c.Key != "" {
		t.Fatalf("plain concurrency = %+v, want on_limit queue, priority 7, no key", c)
	}
}

func TestTaskConcurrencyErrorsPointAtTheField(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"no limit", "concurrency: {key: x}", `main.yaml:3:5: tasks.t.concurrency: missing required field "limit"`},
		{"limit zero", "concurrency: {limit: 0}", "main.yaml:3:26: tasks.t.concurrency.limit: limit must be between 1 and 10000, got 0"},
		{"unknown on_limit", "concurrency: {limit: 1, on_limit: wait}", `main.yaml:3:39: tasks.t.concurrency.on_limit: unknown on limit "wait"`},
		{"priority out of range", "concurrency: {limit: 1, priority: 101}", "main.yaml:3:39: tasks.t.concurrency.priority: priority 101 is out of range (from -100 to 100)"},
		{"priority not a number", "concurrency: {limit: 1, priority: high}", `priority "high" is not an integer`},
		{"bad key template", "concurrency: {limit: 1, key: '{{ input.env'}", "tasks.t.concurrency.key: invalid template"},
		{"unknown field", "concurrency: {limit: 1, max: 2}", "main.yaml:3:29: tasks.t.concurrency.max: unknown key"},
		{"the trigger's word", "concurrency: skip", `main.yaml:3:18: tasks.t.concurrency: a task's concurrency is a mapping such as {limit: 1, key: "{{ input.env }}"}; "skip" is a scheduler trigger's concurrency (allow, skip, cancel_previous), set on the trigger`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errs := loadMain(t, "tasks:\n  t:\n    "+c.src+"\n    flow: {s: {script: echo}}\n")
			if errs == nil || !strings.Contains(errs.Error(), c.want) {
				t.Fatalf("errors = %v, want one containing %q", errs, c.want)
			}
		})
	}
}

func TestUnknownQueueIsALoadErrorOnlyWhenTheServerKnowsItsQueues(t *testing.T) {
	src := "tasks:\n  t:\n    queue: deplyos\n    flow: {s: {script: echo}}\n"
	dir := writeWorkspace(t, map[string]string{".workflows/main.yaml": src})
	_, err := LoadWith("test", dir, map[string]string{}, LoadOptions{Queues: []string{"deploys", "builds"}})
	want := `main.yaml:3:12: tasks.t.queue: unknown queue "deplyos" (did you mean "deploys"?) (the server config's queues defines: deploys, builds)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
	ws, err := LoadWith("test", writeWorkspace(t, map[string]string{".workflows/main.yaml": strings.Replace(src, "deplyos", "deploys", 1)}),
		map[string]string{}, LoadOptions{Queues: []string{"deploys"}})
	if err != nil || ws.Tasks["t"].Queue != "deploys" {
		t.Fatalf("known queue: err %v", err)
	}
	if _, err := LoadWith("test", dir, map[string]string{}, LoadOptions{}); err != nil {
		t.Fatalf("without the server's queues (validate) the name is not checked: %v", err)
	}
}

func TestATriggersConcurrencyIsNotATasksLimit(t *testing.T) {
	_, errs := loadMain(t, "tasks:\n  t:\n    flow: {s: {script: echo}}\ntriggers:\n  nightly:\n    type: scheduler\n    cron: '0 2 * * *'\n    task: t\n    concurrency: {limit: 1}\n")
	want := "main.yaml:9:18: triggers.nightly.concurrency: a scheduler trigger's concurrency is one of allow, skip, cancel_previous; a limit such as {limit: 1} goes on the task (tasks.t.concurrency)"
	if errs == nil || !strings.Contains(errs.Error(), want) {
		t.Fatalf("errors = %v, want %q", errs, want)
	}
}
