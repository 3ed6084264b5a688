package workspace

import (
	"strings"
	"testing"
)

// TestTemplateReferencesAreCheckedAtLoad: a reference that can only fail
// at run time fails the load instead, at the field, naming the fix.
func TestTemplateReferencesAreCheckedAtLoad(t *testing.T) {
	cases := []struct {
		name, src string
		want      []string // nil: valid
	}{
		{"declared inputs, upstream outputs and declared output fields are fine", `
			actions:
			  build:
			    type: script
			    script: echo {{ input.target }}
			    input:
			      target: {type: string}
			    output:
			      version: {type: string}
			tasks:
			  t:
			    input:
			      env: {type: string}
			    flow:
			      b:
			        action: build
			        input: {target: "{{ input.env }}"}
			      use:
			        depends_on: [b]
			        script: echo {{ b.output.version }} {{ input.env }} {{ input.nope | default('') }}
			`, nil},
		{"job input not declared by the task", `
			tasks:
			  t:
			    input:
			      env: {type: string}
			    flow:
			      a:
			        script: echo {{ input.evn }}
			`, []string{`.workflows/main.yaml:7:25: tasks.t.flow.a.script: input "evn" is not declared by task "t" (declared: env)`}},
		{"step input map names what the action sees", `
			tasks:
			  t:
			    input:
			      env: {type: string}
			    flow:
			      a:
			        input: {region: "{{ input.env }}"}
			        script: echo {{ input.env }}
			`, []string{`.workflows/main.yaml:8:25: tasks.t.flow.a.script: input "env" is not declared by step "a"'s input map (declared: region)`}},
		{"a reference in a block script points at the script", `
			tasks:
			  t:
			    input:
			      env: {type: string}
			    flow:
			      a:
			        script: |
			          echo one
			          echo {{ input.evn }}
			`, []string{`.workflows/main.yaml:7:17: tasks.t.flow.a.script: input "evn" is not declared by task "t" (declared: env)`}},
		{"named action reads an input nobody declares or gives", `
			actions:
			  greet:
			    type: script
			    script: echo {{ input.nmae }}
			    input:
			      name: {type: string}
			tasks:
			  t:
			    flow:
			      a: {action: greet}
			`, []string{`.workflows/main.yaml:4:21: actions.greet.script: input "nmae" is not declared by action "greet" (nor given by a step or hook using it) (declared: name)`}},
		{"step that is not upstream", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo a
			      b:
			        script: echo {{ a.output.x }}
			`, []string{`.workflows/main.yaml:7:25: tasks.t.flow.b.script: a.output.x: step "a" is not upstream of "b", so its output is never in scope: add it to depends_on`}},
		{"hyphenated step read in a when", `
			tasks:
			  t:
			    flow:
			      say-hi:
			        script: echo hi
			      b:
			        script: echo b
			        when: "{{ say_hi.output.ok }}"
			`, []string{`.workflows/main.yaml:8:19: tasks.t.flow.b.when: say_hi.output.ok: step "say-hi" is not upstream of "b", so its output is never in scope: add it to depends_on`}},
		{"output field the action does not declare", `
			actions:
			  build:
			    type: script
			    script: echo
			    output:
			      version: {type: string}
			tasks:
			  t:
			    flow:
			      b: {action: build}
			      c:
			        depends_on: [b]
			        input: {v: "{{ b.output.verison }}"}
			        script: echo
			`, []string{`.workflows/main.yaml:13:24: tasks.t.flow.c.input.v: b.output.verison: step "b"'s output has no field "verison" (declared: version)`}},
		{"approval output is known", `
			tasks:
			  t:
			    flow:
			      ok: {type: approval}
			      go:
			        depends_on: [ok]
			        when: "{{ ok.output.aproved }}"
			        script: echo
			`, []string{`.workflows/main.yaml:7:19: tasks.t.flow.go.when: ok.output.aproved: step "ok"'s output has no field "aproved" (declared: approved, approved_at, approved_by, input)`}},
		{"each outside for_each", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo {{ each.item }}
			`, []string{".workflows/main.yaml:5:25: tasks.t.flow.a.script: each.item: `each` is set only in a for_each step's templates"}},
		{"webhook tasks take undeclared keys", `
			triggers:
			  hook: {type: webhook, name: in, task: t}
			tasks:
			  t:
			    input:
			      env: {type: string}
			    flow:
			      a:
			        script: echo {{ input.body.x }}
			`, nil},
		{"hook input reads the job's input", `
			actions:
			  notify: {type: script, script: "echo {{ input.msg }}"}
			tasks:
			  t:
			    input:
			      env: {type: string}
			    flow:
			      a: {script: echo}
			    on_error:
			      - action: notify
			        input: {msg: "{{ hook.status }} {{ input.enviroment }}"}
			`, []string{`.workflows/main.yaml:11:44: tasks.t.on_error[0].input.msg: input "enviroment" is not declared by task "t" (declared: env)`}},
		{"empty when", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo
			        when: ""
			`, []string{`.workflows/main.yaml:6:15: tasks.t.flow.a.when: when is empty: give a condition such as "{{ input.deploy }}", or remove it`}},
		{"input default outside its options", `
			tasks:
			  t:
			    input:
			      env: {type: string, options: [dev, prod], default: staging}
			    flow:
			      a: {script: echo}
			`, []string{`.workflows/main.yaml:4:58: tasks.t.input.env.default: default "staging" is not one of "dev", "prod" (add it to options, or set allow_custom: true)`}},
		{"input default outside its options with allow_custom", `
			tasks:
			  t:
			    input:
			      env: {type: string, options: [dev, prod], default: staging, allow_custom: true}
			    flow:
			      a: {script: echo}
			`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errs := loadMain(t, c.src)
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}
