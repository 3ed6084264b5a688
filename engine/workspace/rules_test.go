package workspace

import (
	"strings"
	"testing"
)

// A step of script type, reused where a case needs some valid flow.
const okFlow = `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo a
			`

// TestValidationRules checks each rule with a workspace it accepts and one
// it rejects, and the exact error, line and column for the latter.
func TestValidationRules(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want []string // nil: the workspace is valid
	}{
		{"minimal task is valid", okFlow, nil},
		{"unknown top-level key suggests the right one", `
			task:
			  t: {}
			`, []string{`.workflows/main.yaml:1:1: task: unknown key (did you mean "tasks"?)`}},
		{"unknown action key suggests the right one", `
			actions:
			  build:
			    type: script
			    scirpt: echo hi
			`, []string{
			`.workflows/main.yaml:2:3: actions.build: missing required field: one of "script" or "source"`,
			`.workflows/main.yaml:4:5: actions.build.scirpt: unknown key (did you mean "script"?)`,
		}},
		{"boolean field with a string is a type error", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo a
			        continue_on_failure: "yes"
			`, []string{`.workflows/main.yaml:6:30: tasks.t.flow.a.continue_on_failure: expected a boolean, got a string`}},
		{"list field with a mapping is a type error", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo a
			        depends_on: {b: 1}
			`, []string{`.workflows/main.yaml:6:21: tasks.t.flow.a.depends_on: expected a list, got a mapping`}},
		{"task without flow", `
			tasks:
			  t:
			    name: T
			`, []string{`.workflows/main.yaml:2:3: tasks.t: missing required field "flow"`}},
		{"action without type", `
			actions:
			  a:
			    script: echo
			`, []string{`.workflows/main.yaml:2:3: actions.a: missing required field "type"`}},
		{"unknown action type", `
			actions:
			  a:
			    type: scirpt
			    script: echo
			`, []string{`.workflows/main.yaml:3:11: actions.a.type: unknown action type "scirpt" (did you mean "script"?)`}},
		{"image is forbidden on script", `
			actions:
			  a:
			    type: script
			    script: echo
			    image: alpine
			`, []string{`.workflows/main.yaml:5:5: actions.a.image: not allowed for script actions`}},
		{"runner is forbidden on docker", `
			actions:
			  a:
			    type: docker
			    image: alpine
			    runner: local
			`, []string{`.workflows/main.yaml:5:5: actions.a.runner: not allowed for docker actions`}},
		{"docker needs an image", `
			actions:
			  a:
			    type: docker
			    cmd: echo hi
			`, []string{`.workflows/main.yaml:2:3: actions.a: missing required field "image"`}},
		{"execution fields are forbidden on task actions", `
			actions:
			  a:
			    type: task
			    task: t
			    script: echo
			    env: {A: b}
			` + okFlow, []string{
			`.workflows/main.yaml:5:5: actions.a.script: not allowed for task actions`,
			`.workflows/main.yaml:6:5: actions.a.env: not allowed for task actions`,
		}},
		{"execution fields are forbidden on approval actions", `
			actions:
			  a:
			    type: approval
			    message: ok?
			    image: alpine
			`, []string{`.workflows/main.yaml:5:5: actions.a.image: not allowed for approval actions`}},
		{"agent needs provider and prompt", `
			actions:
			  a:
			    type: agent
			    model: m
			`, []string{
			`.workflows/main.yaml:2:3: actions.a: missing required field "provider"`,
			`.workflows/main.yaml:2:3: actions.a: missing required field "prompt"`,
		}},
		{"agent temperature within 0..2 is valid", `
			actions:
			  a:
			    type: agent
			    provider: p
			    prompt: hi
			    temperature: 1.5
			`, nil},
		{"agent temperature over 2", `
			actions:
			  a:
			    type: agent
			    provider: p
			    prompt: hi
			    temperature: 2.5
			`, []string{`.workflows/main.yaml:6:18: actions.a.temperature: must be between 0 and 2, got 2.5`}},
		{"script and source together", `
			actions:
			  a:
			    type: script
			    script: echo
			    source: run.sh
			`, []string{
			`.workflows/main.yaml:5:5: actions.a.source: script and source are mutually exclusive: keep one`,
			`.workflows/main.yaml:5:13: actions.a.source: source file "run.sh" not found in the workspace`,
		}},
		{"source pointing outside the workspace", `
			actions:
			  a:
			    type: script
			    source: ../../etc/passwd
			`, []string{`.workflows/main.yaml:4:13: actions.a.source: source "../../etc/passwd" is outside the workspace: give a path relative to the workspace root`}},
		{"source file missing", `
			actions:
			  a:
			    type: script
			    source: scripts/nope.sh
			`, []string{`.workflows/main.yaml:4:13: actions.a.source: source file "scripts/nope.sh" not found in the workspace`}},
		{"dependencies with shell", `
			actions:
			  a:
			    type: script
			    script: echo
			    dependencies: [requests]
			`, []string{`.workflows/main.yaml:5:5: actions.a.dependencies: needs a language other than shell (python, javascript, typescript or go)`}},
		{"dependencies with python are valid", `
			actions:
			  a:
			    type: script
			    language: python
			    script: print(1)
			    dependencies: [requests]
			`, nil},
		{"manifest without runner pod", `
			actions:
			  a:
			    type: script
			    script: echo
			    manifest: {spec: {}}
			`, []string{`.workflows/main.yaml:5:5: actions.a.manifest: only allowed with runner: pod`}},
		{"manifest with runner pod is valid", `
			actions:
			  a:
			    type: script
			    runner: pod
			    script: echo
			    manifest: {spec: {serviceAccountName: builder}}
			  b:
			    type: pod
			    image: alpine
			    manifest: {spec: {}}
			`, nil},
		{"unknown language", `
			actions:
			  a:
			    type: script
			    language: pyhton
			    script: echo
			`, []string{`.workflows/main.yaml:4:15: actions.a.language: unknown language "pyhton" (did you mean "python"?)`}},
		{"unknown runner", `
			actions:
			  a:
			    type: script
			    runner: kubernetes
			    script: echo
			`, []string{`.workflows/main.yaml:4:13: actions.a.runner: unknown runner "kubernetes"`}},
		{"unknown action in a flow step", `
			actions:
			  build:
			    type: script
			    script: make
			tasks:
			  t:
			    flow:
			      a:
			        action: biuld
			`, []string{`.workflows/main.yaml:9:17: tasks.t.flow.a.action: unknown action "biuld" (did you mean "build"?)`}},
		{"step needs an action", `
			tasks:
			  t:
			    flow:
			      a:
			        when: "true"
			`, []string{`.workflows/main.yaml:4:7: tasks.t.flow.a: missing required field "action" (or inline action fields such as type and script)`}},
		{"inline fields beside action", `
			actions:
			  build:
			    type: script
			    script: make
			tasks:
			  t:
			    flow:
			      a:
			        action: build
			        image: alpine
			`, []string{`.workflows/main.yaml:10:9: tasks.t.flow.a.image: inline action field not allowed on a step that names an action`}},
		{"unknown action in a hook", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo
			    on_error:
			      - action: notfiy
			actions:
			  notify:
			    type: script
			    script: echo
			`, []string{`.workflows/main.yaml:7:17: tasks.t.on_error[0].action: unknown action "notfiy" (did you mean "notify"?)`}},
		{"task action naming an unknown task", `
			actions:
			  child:
			    type: task
			    task: tt
			` + okFlow, []string{`.workflows/main.yaml:4:11: actions.child.task: unknown task "tt" (did you mean "t"?)`}},
		{"trigger naming unknown tasks", `
			triggers:
			  events:
			    type: event_source
			    task: consumer
			    target_task: t
			` + okFlow, []string{`.workflows/main.yaml:4:11: triggers.events.task: unknown task "consumer"`}},
		{"depends_on naming an unknown step", `
			tasks:
			  deploy:
			    flow:
			      test:
			        script: go test
			      build:
			        script: go build
			        depends_on: [tset]
			`, []string{`.workflows/main.yaml:8:22: tasks.deploy.flow.build.depends_on: unknown step "tset" (did you mean "test"?)`}},
		{"dependency cycle", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo
			        depends_on: [b]
			      b:
			        script: echo
			        depends_on: [a]
			`, []string{`.workflows/main.yaml:6:21: tasks.t.flow.a.depends_on: dependency cycle: a -> b -> a`}},
		{"self dependency", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo
			        depends_on: [a]
			`, []string{`.workflows/main.yaml:6:21: tasks.t.flow.a.depends_on: dependency cycle: a -> a`}},
		{"step name with brackets", `
			tasks:
			  t:
			    flow:
			      a[0]:
			        script: echo
			`, []string{`.workflows/main.yaml:4:7: tasks.t.flow.a[0]: step name "a[0]" must not contain [ or ] (reserved for for_each instances)`}},
		{"step names that meet in templates", `
			tasks:
			  t:
			    flow:
			      say-hi:
			        script: echo
			      say_hi:
			        script: echo
			`, []string{`.workflows/main.yaml:6:7: tasks.t.flow.say_hi: steps "say-hi" and "say_hi" are both "say_hi" in templates: rename one`}},
		{"task timeout of 7d is valid", `
			tasks:
			  t:
			    timeout: 7d
			    flow:
			      a:
			        script: echo
			        timeout: 86400
			`, nil},
		{"task timeout over 7d", `
			tasks:
			  t:
			    timeout: 8d
			    flow:
			      a:
			        script: echo
			`, []string{`.workflows/main.yaml:3:14: tasks.t.timeout: timeout 8d is over the maximum of 7d`}},
		{"step timeout over 24h", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo
			        timeout: 24h1s
			`, []string{`.workflows/main.yaml:6:18: tasks.t.flow.a.timeout: timeout 24h1s is over the maximum of 24h`}},
		{"malformed duration", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo
			        timeout: 5 minutes
			`, []string{`.workflows/main.yaml:6:18: tasks.t.flow.a.timeout: invalid duration "5 minutes" (use e.g. 30s, 5m, 1h30m or a number of seconds)`}},
		{"six-field cron with seconds is valid", `
			triggers:
			  tick:
			    type: scheduler
			    cron: "*/10 * * * * *"
			    task: t
			` + okFlow, nil},
		{"invalid cron", `
			triggers:
			  tick:
			    type: scheduler
			    cron: "61 * * * *"
			    task: t
			` + okFlow, []string{`.workflows/main.yaml:4:11: triggers.tick.cron: invalid cron expression "61 * * * *": minute 61 is out of range 0-59`}},
		{"cron with four fields", `
			triggers:
			  tick:
			    type: scheduler
			    cron: "* * * *"
			    task: t
			` + okFlow, []string{`.workflows/main.yaml:4:11: triggers.tick.cron: invalid cron expression "* * * *": want 5 fields (minute hour day month weekday) or 6 (with leading seconds), got 4`}},
		{"timezone that is not an IANA name", `
			triggers:
			  tick:
			    type: scheduler
			    cron: "0 3 * * *"
			    timezone: Europe/paris
			    task: t
			` + okFlow, []string{`.workflows/main.yaml:5:15: triggers.tick.timezone: unknown timezone "Europe/paris" (use an IANA name such as Europe/Paris)`}},
		{"unknown concurrency", `
			triggers:
			  tick:
			    type: scheduler
			    cron: "0 3 * * *"
			    concurrency: skp
			    task: t
			` + okFlow, []string{`.workflows/main.yaml:5:18: triggers.tick.concurrency: unknown concurrency "skp" (did you mean "skip"?) (one of: allow, cancel_previous, skip)`}},
		{"scheduler field on a webhook", `
			triggers:
			  hook:
			    type: webhook
			    name: hook
			    cron: "0 3 * * *"
			    task: t
			` + okFlow, []string{`.workflows/main.yaml:5:5: triggers.hook.cron: not allowed for webhook triggers`}},
		{"webhook name that is not URL-safe", `
			triggers:
			  hook:
			    type: webhook
			    name: my hook/1
			    task: t
			` + okFlow, []string{`.workflows/main.yaml:4:11: triggers.hook.name: webhook name "my hook/1" is not URL-safe: use letters, digits, - and _`}},
		{"duplicate webhook names", `
			triggers:
			  one:
			    type: webhook
			    name: deploy
			    task: t
			  two:
			    type: webhook
			    name: deploy
			    task: t
			` + okFlow, []string{`.workflows/main.yaml:8:11: triggers.two.name: webhook name "deploy" is already used by trigger "one" at .workflows/main.yaml:4:11`}},
		{"webhook timeout_secs out of range", `
			triggers:
			  hook:
			    type: webhook
			    name: hook
			    mode: sync
			    timeout_secs: 301
			    task: t
			` + okFlow, []string{`.workflows/main.yaml:6:19: triggers.hook.timeout_secs: must be between 1 and 300, got 301`}},
		{"unknown webhook mode", `
			triggers:
			  hook:
			    type: webhook
			    name: hook
			    mode: blocking
			    task: t
			` + okFlow, []string{`.workflows/main.yaml:5:11: triggers.hook.mode: unknown mode "blocking" (one of: async, sync)`}},
		{"unknown restart policy", `
			triggers:
			  events:
			    type: event_source
			    task: t
			    target_task: t
			    restart_policy: on-failure
			` + okFlow, []string{`.workflows/main.yaml:6:21: triggers.events.restart_policy: unknown restart policy "on-failure" (did you mean "on_failure"?) (one of: always, never, on_failure)`}},
		{"unknown task mode", `
			tasks:
			  t:
			    mode: local
			    flow:
			      a:
			        script: echo
			`, []string{`.workflows/main.yaml:3:11: tasks.t.mode: unknown mode "local" (the only mode is "distributed")`}},
		{"input type that is neither primitive nor a connection type", `
			tasks:
			  t:
			    input:
			      n:
			        type: int
			    flow:
			      a:
			        script: echo
			`, []string{`.workflows/main.yaml:5:15: tasks.t.input.n.type: unknown type "int": not a primitive type nor a connection type (did you mean "integer"?)`}},
		{"input type naming a connection type is valid", `
			connection_types:
			  db:
			    host: {type: string, required: true}
			tasks:
			  t:
			    input:
			      target: {type: db, required: true}
			    flow:
			      a:
			        script: echo
			`, nil},
		{"connection missing a required property", `
			connection_types:
			  db:
			    host: {type: string, required: true}
			    port: {type: integer, default: 5432}
			connections:
			  main:
			    type: db
			    port: 5433
			`, []string{`.workflows/main.yaml:6:3: connections.main: missing required property "host" of connection type "db"`}},
		{"connection with an unknown property", `
			connection_types:
			  db:
			    host: {type: string}
			connections:
			  main:
			    type: db
			    hots: localhost
			`, []string{`.workflows/main.yaml:7:5: connections.main.hots: unknown property of connection type "db" (did you mean "host"?)`}},
		{"connection value of the wrong type", `
			connection_types:
			  db:
			    port: {type: integer}
			connections:
			  main:
			    type: db
			    port: high
			`, []string{`.workflows/main.yaml:7:11: connections.main.port: expected an integer, got high`}},
		{"connection of an unknown type", `
			connections:
			  main:
			    type: postgres
			    host: localhost
			`, []string{`.workflows/main.yaml:3:11: connections.main.type: unknown connection type "postgres"`}},
		{"template that does not parse", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo
			        when: "{{ input.x "
			`, []string{`.workflows/main.yaml:6:27: tasks.t.flow.a.when: invalid template: `}},
		{"template in a nested step input that does not parse", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo
			        input:
			          deep:
			            - {x: "{% if %}"}
			`, []string{`.workflows/main.yaml:8:19: tasks.t.flow.a.input.deep[0].x: invalid template: `}},
		{"trigger naming an unknown target task", `
			triggers:
			  events:
			    type: event_source
			    task: t
			    target_task: tt
			` + okFlow, []string{`.workflows/main.yaml:5:18: triggers.events.target_task: unknown task "tt" (did you mean "t"?)`}},
		{"workspace hook naming an unknown action", `
			on_success:
			  - action: ping
			`, []string{`.workflows/main.yaml:2:13: on_success[0].action: unknown action "ping"`}},
		{"inline task step naming an unknown task", `
			tasks:
			  t:
			    flow:
			      child:
			        type: task
			        task: other
			`, []string{`.workflows/main.yaml:6:15: tasks.t.flow.child.task: unknown task "other"`}},
		{"step name that shadows a template variable", `
			tasks:
			  t:
			    flow:
			      input:
			        script: echo
			`, []string{`.workflows/main.yaml:4:7: tasks.t.flow.input: step name "input" is reserved in templates: rename it`}},
		{"connection type property of a connection type", `
			connection_types:
			  a:
			    x: {type: string}
			  b:
			    y: {type: a}
			`, []string{`.workflows/main.yaml:5:15: connection_types.b.y.type: unknown type "a"`}},
		{"unknown output type", `
			actions:
			  a:
			    type: script
			    script: echo
			    output:
			      n: {type: float}
			`, []string{`.workflows/main.yaml:6:17: actions.a.output.n.type: unknown output type "float"`}},
		{"agent max_tokens below 1", `
			actions:
			  a:
			    type: agent
			    provider: p
			    prompt: hi
			    max_tokens: 0
			`, []string{`.workflows/main.yaml:6:17: actions.a.max_tokens: must be at least 1`}},
		{"for_each that is neither a template nor a list", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo
			        for_each: {a: 1}
			`, []string{`.workflows/main.yaml:6:19: tasks.t.flow.a.for_each: expected a template string or a list, got a mapping`}},
		{"event source with negative backoff", `
			triggers:
			  events:
			    type: event_source
			    task: t
			    target_task: t
			    backoff_secs: -1
			` + okFlow, []string{`.workflows/main.yaml:6:19: triggers.events.backoff_secs: must not be negative`}},
		{"YAML syntax error", `
			tasks:
			  t: [a, b
			`, []string{`.workflows/main.yaml:`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := loadMain(t, tc.src)
			got := make([]string, len(errs))
			for i, e := range errs {
				got[i] = e.Error()
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i := range got {
				// A want ending in ": " checks the location and path; the
				// rest is the template engine's or YAML parser's own text.
				if strings.HasSuffix(tc.want[i], ": ") || strings.HasSuffix(tc.want[i], ".yaml:") {
					if !strings.HasPrefix(got[i], tc.want[i]) {
						t.Errorf("error %d:\ngot  %s\nwant %s...", i, got[i], tc.want[i])
					}
					continue
				}
				if got[i] != tc.want[i] {
					t.Errorf("error %d:\ngot  %s\nwant %s", i, got[i], tc.want[i])
				}
			}
		})
	}
}
