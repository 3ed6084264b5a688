package workspace

import (
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// Every error points at the line and column of the thing it is about,
// however deep it sits: syntax errors at the offending token, field errors
// at the field's key or value.
func TestErrorPositionsAreExact(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       string // "line:col: message prefix" of the first error
	}{
		{"unclosed flow sequence", "tasks:\n  t:\n    flow:\n      s: {script: [echo}\n", "4:24: syntax error: ',' or ']' must be specified"},
		{"unclosed quote", "tasks:\n  t:\n    flow:\n      s:\n        script: \"echo\n", "5:17: syntax error: could not find end character of double-quoted text"},
		{"tab indentation", "tasks:\n\tt:\n", "2:1: syntax error: found character '\t' that cannot start any token"},
		{"bad indentation of a nested key", "tasks:\n  t:\n    flow:\n      s:\n        script: echo\n       type: script\n", "6:8: syntax error: value is not allowed in this context"},
		{"duplicate key", "tasks:\n  t:\n    flow:\n      s: {script: echo}\n      s: {script: echo}\n", "5:7: syntax error: mapping key \"s\" already defined at [4:7]"},
		{"unknown step field", "tasks:\n  t:\n    flow:\n      s:\n        script: echo\n        dependz: [x]\n", "6:9: tasks.t.flow.s.dependz: unknown key"},
		{"unknown step field in flow style", "tasks:\n  t:\n    flow:\n      s: {script: echo, dependz: [x]}\n", "4:25: tasks.t.flow.s.dependz: unknown key"},
		{"unknown action", "tasks:\n  t:\n    flow:\n      s:\n        action: nope\n", "5:17: tasks.t.flow.s.action: unknown action \"nope\""},
		{"unknown dependency", "tasks:\n  t:\n    flow:\n      a: {script: echo}\n      b:\n        script: echo\n        depends_on:\n          - a\n          - c\n", "9:13: tasks.t.flow.b.depends_on: unknown step \"c\""},
		{"dependency cycle", "tasks:\n  t:\n    flow:\n      a:\n        script: echo\n        depends_on: [b]\n      b:\n        script: echo\n        depends_on: [a]\n", "6:21: tasks.t.flow.a.depends_on: dependency cycle: a -> b -> a"},
		{"bad timeout", "tasks:\n  t:\n    flow:\n      s:\n        script: echo\n        timeout: soon\n", "6:18: tasks.t.flow.s.timeout: invalid duration \"soon\""},
		{"for_each of a number", "tasks:\n  t:\n    flow:\n      s:\n        script: echo\n        for_each: 3\n", "6:19: tasks.t.flow.s.for_each: expected a template string or a list, got an integer"},
		{"step without a body", "tasks:\n  t:\n    flow:\n      s:\n        type: script\n", "4:7: tasks.t.flow.s: missing required field"},
		{"input of an unknown type", "tasks:\n  t:\n    input:\n      n:\n        type: strin\n    flow:\n      s: {script: echo}\n", "5:15: tasks.t.input.n.type: unknown type \"strin\""},
		{"task without flow", "tasks:\n  t:\n    description: x\n", "2:3: tasks.t: missing required field \"flow\""},
		{"trigger of an unknown task", "tasks:\n  t:\n    flow:\n      s: {script: echo}\ntriggers:\n  nightly:\n    type: scheduler\n    cron: \"0 0 * * *\"\n    task: nope\n", "9:11: triggers.nightly.task: unknown task \"nope\""},
		{"bad cron", "tasks:\n  t:\n    flow:\n      s: {script: echo}\ntriggers:\n  nightly:\n    type: scheduler\n    cron: \"61 * * * *\"\n    task: t\n", "8:11: triggers.nightly.cron: invalid cron expression \"61 * * * *\": minute 61 is out of range 0-59"},
		{"comments and blank lines before a nested error", "# head\n\ntasks:\n  # a task\n  t:\n\n    flow:\n      s:\n        # the script\n        script: echo\n        timeout: many\n", "11:18: tasks.t.flow.s.timeout: invalid duration \"many\""},
		{"error after an anchored block", "actions:\n  base: &b {type: script, script: echo}\ntasks:\n  t:\n    flow:\n      s:\n        action: base\n        when: [x]\n", "8:15: tasks.t.flow.s.when: expected a string, got a list"},
		{"template error in a quoted value", "tasks:\n  t:\n    flow:\n      s:\n        script: \"{{ input.x \"\n", "5:29: tasks.t.flow.s.script: invalid template"},
		{"template error on the third line of a literal block", "tasks:\n  t:\n    flow:\n      s:\n        script: |\n          echo one\n          echo {{ input.x \n", "7:27: tasks.t.flow.s.script: invalid template"},
		{"a number, '.' and a wide character, on which the template library hangs", "tasks:\n  t:\n    flow:\n      s:\n        script: |\n          echo one\n          echo {{ 2.中 }}\n", "7:20: tasks.t.flow.s.script: invalid template"},
		{"template error in a folded block stays at the block", "tasks:\n  t:\n    flow:\n      s:\n        script: >\n          echo one\n          echo {{ input.x \n", "5:17: tasks.t.flow.s.script: invalid template"},
		{"a second webhook of the same name, after the first", "tasks:\n  t:\n    flow:\n      s: {script: echo}\ntriggers:\n  zz-first:\n    type: webhook\n    name: deploy\n    task: t\n  aa-second:\n    type: webhook\n    name: deploy\n    task: t\n", "12:11: triggers.aa-second.name: webhook name \"deploy\" is already used by trigger \"zz-first\" at .workflows/w.yaml:8:11"},
		{"top-level unknown key", "tasks:\n  t:\n    flow:\n      s: {script: echo}\ntaskz: {}\n", "5:1: taskz: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeWorkspace(t, map[string]string{".workflows/w.yaml": tt.yaml})
			_, errs := loadDir(t, dir)
			got := errStrings(errs)
			if len(got) == 0 {
				t.Fatalf("no error, want %s", tt.want)
			}
			first := strings.TrimPrefix(got[0], ".workflows/w.yaml:")
			if tt.want == "" || !strings.HasPrefix(first, tt.want) {
				t.Errorf("first error %q, want %q...\nall: %s", first, tt.want, strings.Join(got, "\n"))
			}
		})
	}
}

// Triggers keep their declaration order (files by path, then as written),
// which webhook matching and the duplicate-name check follow.
func TestTriggerNamesFollowDeclarationOrder(t *testing.T) {
	trig := func(names ...string) string {
		s := "triggers:\n"
		for _, n := range names {
			s += "  " + n + ": {type: webhook, name: " + n + ", task: t}\n"
		}
		return s
	}
	dir := writeWorkspace(t, map[string]string{
		".workflows/a.yaml":   taskFile("t") + trig("zulu", "bravo"),
		".workflows/b/c.yaml": trig("alpha"),
		".workflows/d.yaml":   trig("mike"),
	})
	ws, errs := loadDir(t, dir)
	if errs != nil {
		t.Fatal(errs)
	}
	if got, want := strings.Join(ws.TriggerNames(), " "), "zulu bravo alpha mike"; got != want {
		t.Errorf("trigger order %q, want %q", got, want)
	}
	// Built by hand, without an order: sorted.
	hand := &workflow.Workspace{Triggers: map[string]*workflow.Trigger{"b": {}, "a": {}}}
	if got := strings.Join(hand.TriggerNames(), " "); got != "a b" {
		t.Errorf("hand-built trigger order %q, want sorted", got)
	}
}
