package workspace

import (
	"strings"
	"testing"
)

// TestScriptPlaceholdersWhereNoQuotingIsSound: a {{ }} where even a quoted
// value runs as code is a load error at the placeholder's file:line:col
// that says why and what to write instead.
func TestScriptPlaceholdersWhereNoQuotingIsSound(t *testing.T) {
	cases := []struct {
		name, src string
		want      string // the whole error; "" = the workspace loads
	}{
		{"a value as data", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo "hello {{ input.name }}"
			`, ""},
		{"a command name in a literal block", `
			tasks:
			  t:
			    flow:
			      a:
			        script: |
			          echo start
			          {{ input.cmd }} --verbose
			`, `.workflows/main.yaml:7:11: tasks.t.flow.a.script: {{ input.cmd }}: it is a command name: the value would be run as a command; write "$INPUT_CMD" instead: each input is in the environment as data`},
		{"arithmetic in a one-line script", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo $(( {{ input.n }} * 2 ))
			`, `.workflows/main.yaml:5:26: tasks.t.flow.a.script: {{ input.n }}: it is in arithmetic`},
		{"eval in a named action", `
			actions:
			  run:
			    type: script
			    script: |
			      eval "deploy {{ build.output.flags }}"
			tasks:
			  t:
			    flow:
			      a: {action: run}
			`, `.workflows/main.yaml:5:20: actions.run.script: {{ build.output.flags }}: it is an argument of eval, which runs its arguments as code; pass the value through env:`},
		{"bash -c", `
			tasks:
			  t:
			    flow:
			      a:
			        script: |
			          bash -c "echo {{ input.x }}"
			`, `.workflows/main.yaml:6:25: tasks.t.flow.a.script: {{ input.x }}: it is an argument of a shell run with -c`},
		{"a case pattern", `
			tasks:
			  t:
			    flow:
			      a:
			        script: |
			          case "$1" in
			            {{ input.p }}) echo hit ;;
			          esac
			`, `.workflows/main.yaml:7:13: tasks.t.flow.a.script: {{ input.p }}: it is a case pattern`},
		{"backquotes", `
			tasks:
			  t:
			    flow:
			      a:
			        script: |
			          echo ` + "`echo {{ input.x }}`" + `
			`, `.workflows/main.yaml:6:22: tasks.t.flow.a.script: {{ input.x }}: it is inside backquotes`},
		// A quoted scalar's escapes shift columns: the error is at the scalar.
		{"a docker cmd is a shell script", `
			tasks:
			  t:
			    flow:
			      a: {type: docker, image: alpine, cmd: '{{ input.tool }} --help'}
			`, `.workflows/main.yaml:4:45: tasks.t.flow.a.cmd: {{ input.tool }}: it is a command name`},
		{"a command run with sh -c is a shell script", `
			tasks:
			  t:
			    flow:
			      a:
			        type: docker
			        image: alpine
			        entrypoint: [sh, -ec]
			        command:
			          - echo ok; {{ input.tool }} --help
			`, `.workflows/main.yaml:9:22: tasks.t.flow.a.command[0]: {{ input.tool }}: it is a command name`},
		{"an interpreter that is not a POSIX shell", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo "{{ input.x }}"
			        interpreter: zsh
			`, `.workflows/main.yaml:6:22: tasks.t.flow.a.interpreter: interpreter "zsh" is not a POSIX shell, so the script's {{ }} values cannot be quoted for it`},
		{"fish without placeholders is fine", `
			tasks:
			  t:
			    flow:
			      a:
			        script: echo $HOME
			        interpreter: fish
			`, ""},
		{"raw opts out", `
			tasks:
			  t:
			    flow:
			      a: {script: '{{ "make" | raw }} all'}
			`, ""},
		{"control flow is judged at render time", `
			tasks:
			  t:
			    flow:
			      a:
			        script: |
			          {% if input.fast %}
			          echo {{ input.x }}
			          {% endif %}
			`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errs := loadMain(t, c.src)
			if c.want == "" {
				if len(errs) > 0 {
					t.Fatalf("want it to load: %v", errs)
				}
				return
			}
			if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), c.want) {
				t.Fatalf("got %v\nwant one error starting %s", errs, c.want)
			}
		})
	}
}

func TestRawValuesFromDataAreWarnings(t *testing.T) {
	ws, errs := loadMain(t, `
		tasks:
		  t:
		    flow:
		      a:
		        script: |
		          {{ input.cmd | raw }}
		          {{ secrets.TOOL | raw }} --version
		          echo "{{ input.x }}"
		`)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if len(ws.Warnings) != 1 || ws.Warnings[0].Error() != `.workflows/main.yaml:6:11: tasks.t.flow.a.script: {{ input.cmd | raw }} puts a job input (an API caller's, an event's or a hook's data) into the script as code: drop raw to have it quoted as data` {
		t.Fatalf("warnings %v", ws.Warnings)
	}
}
