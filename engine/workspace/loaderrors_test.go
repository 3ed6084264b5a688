package workspace

import (
	"slices"
	"strings"
	"testing"
)

// A load error of a template rendered at load time (connection values and
// webhook secrets render with the workspace's secrets, secrets with the
// environment) names the expression, never the rendered secret: gonja
// prints the map a method was called on, every secret in it.
func TestLoadErrorsNeverCarryARenderedSecret(t *testing.T) {
	const region = "eu-west-1" // HOME_REGION in loadDir's environment
	_, errs := loadMain(t, `
		secrets:
		  REGION: "{{ env.HOME_REGION }}"
		  OTHER: "{{ env.HOME_REGION | upper }}-side"
		connection_types:
		  cloud:
		    region: {type: string}
		connections:
		  prod:
		    type: cloud
		    region: "{{ secrets.REGION() }}"
		triggers:
		  hook: {type: webhook, name: h, task: t, secret: "{{ secret.OTHER | tojson(indent=secret.OTHER) }}"}
		tasks:
		  t:
		    flow:
		      s: {script: echo}
		`)
	if len(errs) != 2 {
		t.Fatalf("errors %v, want the connection's and the webhook secret's", errs)
	}
	for _, e := range errs {
		for _, v := range []string{region, strings.ToUpper(region) + "-side"} {
			if strings.Contains(e.Error(), v) {
				t.Errorf("load error carries the secret %q: %v", v, e)
			}
		}
		if !strings.Contains(e.Error(), "{{ secret") {
			t.Errorf("load error does not name the expression: %v", e)
		}
	}
}

// Each load problem says which tasks its file defines, with their folders,
// so the API can show it only to those who may view them.
func TestLoadErrorsNameTheTasksOfTheirFile(t *testing.T) {
	_, errs := loadMain(t, `
		tasks:
		  deploy:
		    folder: ops/
		    flow:
		      s: {action: missing}
		  build:
		    flow:
		      s: {script: echo}
		`, ".workflows/actions.yaml", "actions:\n  broken: {type: nope}\n")
	if len(errs) != 2 {
		t.Fatalf("errors %v, want two", errs)
	}
	for _, e := range errs {
		got := slices.Sorted(slices.Values(e.Tasks))
		switch e.File {
		case ".workflows/main.yaml":
			if !slices.Equal(got, []string{"build", "ops/deploy"}) {
				t.Errorf("%v: tasks %q, want build and ops/deploy", e, got)
			}
		case ".workflows/actions.yaml":
			if len(got) != 0 {
				t.Errorf("%v: tasks %q, want none", e, got)
			}
		default:
			t.Errorf("unexpected error %v", e)
		}
	}
}

// An input default rendered from a secret that is not of the input's type
// fails naming the template, not the value it rendered to.
func TestARenderedDefaultOfTheWrongTypeDoesNotQuoteItsValue(t *testing.T) {
	ws := mustLoad(t, `
		secrets:
		  TOKEN: sk-live-DEFAULT
		tasks:
		  t:
		    input:
		      n: {type: integer, default: "{{ secret.TOKEN }}"}
		      pick: {type: string, options: [a, b], default: "{{ secret.TOKEN }}"}
		    flow:
		      s: {script: echo}
		`)
	for _, in := range []map[string]any{{"pick": "a"}, {"n": 1}} {
		_, err := ws.ResolveInput(ws.Tasks["t"].Input, in)
		if err == nil || strings.Contains(err.Error(), "sk-live") || !strings.Contains(err.Error(), "{{ secret.TOKEN }}") {
			t.Errorf("input %v: error %v, want one naming the template and not its value", in, err)
		}
	}
}
