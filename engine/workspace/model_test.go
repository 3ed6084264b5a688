package workspace

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine/template/quote"
	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/goccy/go-yaml"
)

func mustLoad(t *testing.T, src string) *workflow.Workspace {
	t.Helper()
	ws, errs := loadMain(t, src)
	if errs != nil {
		t.Fatalf("load:\n%v", errs)
	}
	return ws
}

func TestScriptActionDefaultsAndLanguageAliases(t *testing.T) {
	ws := mustLoad(t, `
		actions:
		  plain: {type: script, script: echo}
		  js: {type: script, language: js, script: "1"}
		  ts: {type: script, language: ts, script: "1", runner: docker}
		  sh: {type: script, language: sh, script: "1"}
		  bash: {type: script, language: bash, script: "1"}
		  py: {type: script, language: Py, script: "1"}
		  golang: {type: script, language: golang, script: "1"}
		`)
	cases := []struct{ action, runner, language string }{
		{"plain", "local", "shell"},
		{"js", "local", "javascript"},
		{"ts", "docker", "typescript"},
		{"sh", "local", "shell"},
		{"bash", "local", "shell"},
		{"py", "local", "python"},
		{"golang", "local", "go"},
	}
	for _, c := range cases {
		a := ws.Actions[c.action]
		if a.Runner != c.runner || a.Language != c.language {
			t.Errorf("%s: runner %q language %q, want %q %q", c.action, a.Runner, a.Language, c.runner, c.language)
		}
	}
}

// Every language a script may be written in has a quoting splicer: its
// {{ }} values are data, never plain text pasted into code.
func TestEveryLanguageQuotesItsValues(t *testing.T) {
	for _, lang := range workflow.Languages() {
		if problems := quote.Check(quote.Lang(lang), "x", nil); len(problems) > 0 {
			t.Errorf("language %s: %s", lang, problems[0].Message)
		}
	}
}

func TestTaskDefaultsFlowOrderAndInlineSteps(t *testing.T) {
	ws := mustLoad(t, `
		actions:
		  build: {type: script, script: make}
		tasks:
		  t:
		    flow:
		      zeta:
		        action: build
		      alpha:
		        script: echo {{ zeta.output }}
		        depends_on: [zeta]
		      mid:
		        type: docker
		        image: alpine
		        cmd: echo hi
		`)
	task := ws.Tasks["t"]
	if task.Mode != "distributed" {
		t.Errorf("mode %q, want distributed", task.Mode)
	}
	if want := []string{"zeta", "alpha", "mid"}; !reflect.DeepEqual(task.FlowOrder, want) {
		t.Errorf("FlowOrder %v, want %v", task.FlowOrder, want)
	}
	if s := task.Flow["zeta"]; s.Action != "build" || s.Inline != nil {
		t.Errorf("zeta: want a reference to build, got %+v", s)
	}
	inline := task.Flow["alpha"].Inline
	if inline == nil || inline.Type != workflow.TypeScript || inline.Script != "echo {{ zeta.output }}" || inline.Runner != "local" {
		t.Errorf("alpha: want an inline script action, got %+v", inline)
	}
	if a, ok := ws.StepAction(task.Flow["mid"]); !ok || a.Type != workflow.TypeDocker || a.Image != "alpine" {
		t.Errorf("mid: want an inline docker action, got %+v", a)
	}
}

func TestInputsOrderByOrderThenFileOrder(t *testing.T) {
	ws := mustLoad(t, `
		tasks:
		  t:
		    input:
		      c: {type: string}
		      b: {type: string, order: 2}
		      a: {type: string}
		      d: {type: integer, order: 1, default: 3}
		      e: {type: string, options: [x, y], allow_custom: true, secret: true, required: true}
		    flow:
		      s: {script: echo}
		`)
	in := ws.Tasks["t"].Input
	if want := []string{"d", "b", "c", "a", "e"}; !reflect.DeepEqual(in.Order, want) {
		t.Errorf("Order %v, want %v", in.Order, want)
	}
	e := in.Fields["e"]
	if !e.Required || !e.Secret || !e.AllowCustom || !reflect.DeepEqual(e.Options, []string{"x", "y"}) || e.Name != "e" {
		t.Errorf("field e decoded wrong: %+v", e)
	}
	if in.Fields["d"].Default != 3 {
		t.Errorf("default of d = %#v, want 3", in.Fields["d"].Default)
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var back workflow.Inputs
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Order, in.Order) {
		t.Errorf("JSON round trip changed the order: %v, want %v (json %s)", back.Order, in.Order, b)
	}
}

func TestTriggerDefaultsAreFilledIn(t *testing.T) {
	ws := mustLoad(t, `
		triggers:
		  cron: {type: scheduler, cron: "0 * * * *", task: t}
		  hook: {type: webhook, name: go, task: t}
		  events: {type: event_source, task: t, target_task: t}
		tasks:
		  t:
		    flow:
		      s: {script: echo}
		`)
	cron, hook, ev := ws.Triggers["cron"], ws.Triggers["hook"], ws.Triggers["events"]
	if !cron.Enabled || cron.Timezone != "UTC" || cron.Concurrency != "allow" || cron.Name != "cron" {
		t.Errorf("scheduler defaults: %+v", cron)
	}
	if !hook.Enabled || hook.Mode != "async" || hook.TimeoutSecs != 30 || hook.WebhookName != "go" {
		t.Errorf("webhook defaults: %+v", hook)
	}
	if !ev.Enabled || ev.RestartPolicy != "always" || ev.BackoffSecs != 5 || ev.MaxInFlight != 0 {
		t.Errorf("event source defaults: %+v", ev)
	}
}

func TestSecretsRenderFromEnvAndConnectionsFromSecrets(t *testing.T) {
	ws := mustLoad(t, `
		secrets:
		  REGION: "{{ env.HOME_REGION }}"
		  PLAIN: literal
		connection_types:
		  cloud:
		    region: {type: string, required: true}
		    retries: {type: integer, default: 3}
		    debug: {type: boolean}
		connections:
		  prod:
		    type: cloud
		    region: "{{ secrets.REGION }}"
		    debug: "{{ 'true' }}"
		triggers:
		  hook: {type: webhook, name: h, task: t, secret: "{{ secret.PLAIN }}-x"}
		tasks:
		  t:
		    flow:
		      s: {script: echo}
		`)
	if ws.Secrets["REGION"] != "eu-west-1" || ws.Secrets["PLAIN"] != "literal" {
		t.Errorf("secrets: %v", ws.Secrets)
	}
	want := map[string]any{"region": "eu-west-1", "retries": 3, "debug": true}
	if got := ws.Connections["prod"].Values; !reflect.DeepEqual(got, want) {
		t.Errorf("connection values %#v, want %#v", got, want)
	}
	if ws.Triggers["hook"].Secret != "literal-x" {
		t.Errorf("webhook secret %q, want literal-x", ws.Triggers["hook"].Secret)
	}
}

func TestSecretWithUndefinedEnvIsAnError(t *testing.T) {
	_, errs := loadMain(t, `
		secrets:
		  TOKEN: "{{ env.NOT_SET_ANYWHERE }}"
		`)
	if len(errs) != 1 || errs[0].Path != "secrets.TOKEN" || errs[0].Line != 2 || errs[0].Col != 10 {
		t.Fatalf("want one error at secrets.TOKEN 2:10, got %v", errs)
	}
}

func TestTemplatesAreParsedIntoTheWorkspaceSet(t *testing.T) {
	ws := mustLoad(t, `
		tasks:
		  t:
		    flow:
		      s:
		        script: echo {{ input.name | upper }}
		`)
	tpl, err := ws.Templates.Parse("echo {{ input.name | upper }}")
	if err != nil {
		t.Fatal(err)
	}
	out, err := tpl.Render(map[string]any{"input": map[string]any{"name": "ada"}})
	if err != nil || out != "echo ADA" {
		t.Errorf("render = %q, %v; want echo ADA", out, err)
	}
}

func TestDurationParsing(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		text string
		bad  bool
	}{
		{in: "30s", want: 30 * time.Second, text: "30s"},
		{in: "1h30m", want: 90 * time.Minute, text: "1h30m"},
		{in: "90", want: 90 * time.Second, text: "1m30s"},
		{in: "7d", want: 7 * 24 * time.Hour, text: "168h"},
		{in: "2h0m5s", want: 2*time.Hour + 5*time.Second, text: "2h5s"},
		{in: "1.5h", bad: true},
		{in: "-5", bad: true},
		{in: "5 minutes", bad: true},
		{in: "", bad: true},
		{in: "99999999999999999999s", bad: true},
	}
	for _, c := range cases {
		d, err := workflow.ParseDuration(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("ParseDuration(%q) = %v, want an error", c.in, d)
			}
			continue
		}
		if err != nil || d.Std() != c.want || d.String() != c.text {
			t.Errorf("ParseDuration(%q) = %v (%s), %v; want %v (%s)", c.in, d.Std(), d, err, c.want, c.text)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	type wrap struct {
		D workflow.Duration `json:"d,omitempty"`
	}
	b, _ := json.Marshal(wrap{D: workflow.Duration(90 * time.Minute)})
	if string(b) != `{"d":"1h30m"}` {
		t.Errorf("marshal = %s", b)
	}
	if b, _ := json.Marshal(wrap{}); string(b) != `{}` {
		t.Errorf("zero duration should be omitted, got %s", b)
	}
	for in, want := range map[string]time.Duration{`{"d":"45s"}`: 45 * time.Second, `{"d":120}`: 2 * time.Minute} {
		var w wrap
		if err := json.Unmarshal([]byte(in), &w); err != nil || w.D.Std() != want {
			t.Errorf("unmarshal %s = %v, %v; want %v", in, w.D.Std(), err, want)
		}
	}
	var w wrap
	if err := json.Unmarshal([]byte(`{"d":"soon"}`), &w); err == nil {
		t.Error("unmarshal of a bad duration should fail")
	}
}

func TestStepTimeoutIsDecoded(t *testing.T) {
	ws := mustLoad(t, `
		tasks:
		  t:
		    timeout: 2h
		    flow:
		      s: {script: echo, timeout: 1h30m}
		`)
	if ws.Tasks["t"].Timeout.Std() != 2*time.Hour || ws.Tasks["t"].Flow["s"].Timeout.Std() != 90*time.Minute {
		t.Errorf("timeouts: task %v step %v", ws.Tasks["t"].Timeout, ws.Tasks["t"].Flow["s"].Timeout)
	}
}

func TestAnchorsAliasesAndMergeKeys(t *testing.T) {
	ws := mustLoad(t, `
		actions:
		  base: &base
		    type: script
		    language: python
		    script: print(1)
		  derived:
		    <<: *base
		    script: print(2)
		`)
	d := ws.Actions["derived"]
	if d.Language != "python" || d.Script != "print(2)" {
		t.Errorf("merge key: got %+v", d)
	}
}

func TestDurationYAML(t *testing.T) {
	var v struct {
		A workflow.Duration `yaml:"a"`
		B workflow.Duration `yaml:"b"`
	}
	if err := yaml.Unmarshal([]byte("a: 1h30m\nb: 45\n"), &v); err != nil {
		t.Fatal(err)
	}
	if v.A.Std() != 90*time.Minute || v.B.Std() != 45*time.Second {
		t.Errorf("decoded %v and %v, want 1h30m and 45s", v.A, v.B)
	}
	out, err := yaml.Marshal(v)
	if err != nil || string(out) != "a: 1h30m\nb: 45s\n" {
		t.Errorf("marshal = %q, %v", out, err)
	}
	if err := yaml.Unmarshal([]byte("a: later\n"), &v); err == nil {
		t.Error("a bad duration should not decode")
	}
}

func TestInlineStepMarshalsItsActionFieldsOnTheStep(t *testing.T) {
	step := &workflow.FlowStep{
		DependsOn: []string{"a"},
		Input:     map[string]any{"x": "{{ a.output.x }}"},
		Inline:    &workflow.Action{Type: workflow.TypeScript, Script: "echo hi", Runner: "local", Language: "shell"},
	}
	raw, err := json.Marshal(step)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got["type"] != "script" || got["script"] != "echo hi" || got["inline"] != nil {
		t.Fatalf("inline action not flattened: %s", raw)
	}
	if in, _ := got["input"].(map[string]any); in["x"] != "{{ a.output.x }}" {
		t.Fatalf("the step's own input was lost: %s", raw)
	}
	named, _ := json.Marshal(&workflow.FlowStep{Action: "build"})
	if string(named) != `{"action":"build"}` {
		t.Fatalf("named step: %s", named)
	}
}
