package workspace

import (
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
)

func TestStepRetryLayersStepOverActionOverDefaults(t *testing.T) {
	ws, errs := loadMain(t, `
		actions:
		  flaky:
		    type: script
		    script: exit 1
		    retries: 3
		    retry_delay: 2s
		tasks:
		  t:
		    flow:
		      plain:
		        script: echo
		      inherits:
		        action: flaky
		      overrides:
		        action: flaky
		        retries: 1
		        retry_backoff: 1
		      inline:
		        script: echo
		        retries: 2
		        retry_delay: 1m
		`)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	flow := ws.Tasks["t"].Flow
	policy := func(step string) workflow.RetryPolicy {
		a, _ := ws.StepAction(flow[step])
		return workflow.StepRetry(flow[step], a)
	}
	cases := []struct {
		step string
		want workflow.RetryPolicy
	}{
		{"plain", workflow.RetryPolicy{Retries: 0, Delay: 10 * time.Second, Backoff: 2}},
		{"inherits", workflow.RetryPolicy{Retries: 3, Delay: 2 * time.Second, Backoff: 2}},
		{"overrides", workflow.RetryPolicy{Retries: 1, Delay: 2 * time.Second, Backoff: 1}},
		{"inline", workflow.RetryPolicy{Retries: 2, Delay: time.Minute, Backoff: 2}},
	}
	for _, c := range cases {
		if got := policy(c.step); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.step, got, c.want)
		}
	}
}

func TestRetryDelayGrowsByBackoffUpToFiveMinutes(t *testing.T) {
	p := workflow.RetryPolicy{Retries: 10, Delay: 10 * time.Second, Backoff: 2}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	for i, w := range want {
		if got := p.DelayAfter(i + 1); got != w {
			t.Errorf("after attempt %d: got %s, want %s", i+1, got, w)
		}
	}
	constant := workflow.RetryPolicy{Retries: 3, Delay: 3 * time.Second, Backoff: 1}
	if got := constant.DelayAfter(3); got != 3*time.Second {
		t.Errorf("constant backoff: got %s", got)
	}
}

func TestRetryFieldErrorsNameTheField(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"too many retries", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo
			        retries: 11
			`, `.workflows/main.yaml:6:18: tasks.t.flow.a.retries: retries must be between 0 and 10, got 11`},
		{"negative retries on an action", `
			actions:
			  x:
			    type: script
			    script: echo
			    retries: -1
			`, `.workflows/main.yaml:5:14: actions.x.retries: retries must be between 0 and 10, got -1`},
		{"bad delay", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo
			        retry_delay: soon
			`, `.workflows/main.yaml:6:22: tasks.t.flow.a.retry_delay: invalid duration "soon" (use e.g. 30s, 5m, 1h30m or a number of seconds)`},
		{"delay over the cap", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo
			        retry_delay: 10m
			`, `.workflows/main.yaml:6:22: tasks.t.flow.a.retry_delay: retry_delay 10m is over the maximum of 5m`},
		{"backoff under one", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo
			        retry_backoff: 0.5
			`, `.workflows/main.yaml:6:24: tasks.t.flow.a.retry_backoff: retry_backoff must be between 1 (constant delay) and 10, got 0.5`},
		{"approval action", `
			actions:
			  ok:
			    type: approval
			    retries: 2
			`, `.workflows/main.yaml:4:5: actions.ok.retries: not allowed for approval actions`},
		{"step running an approval", `
			actions:
			  ok:
			    type: approval
			tasks:
			  t:
			    flow:
			      a:
			        action: ok
			        retries: 2
			`, `.workflows/main.yaml:9:9: tasks.t.flow.a.retries: not allowed for approval actions (they do not retry)`},
		{"agent action (its provider client retries)", `
			actions:
			  ask:
			    type: agent
			    provider: llm
			    prompt: hi
			    retries: 1
			`, `.workflows/main.yaml:6:5: actions.ask.retries: not allowed for agent actions`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errs := loadMain(t, c.src)
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if len(got) != 1 || got[0] != c.want {
				t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), c.want)
			}
		})
	}
}
