package local

import (
	"os"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
)

// The input file must read the same from the script, again, and from a
// child process, wherever it lives (memory or disk).
func TestInputFileReadsAgainAndFromChildren(t *testing.T) {
	script := `cat "$APPLIANCE_INPUT"; echo; cat "$APPLIANCE_INPUT"; echo
python3 -c 'import json, os; print(json.load(open(os.environ["APPLIANCE_INPUT"]))["name"])'`
	for _, lang := range []string{"shell", "python"} {
		t.Run(lang, func(t *testing.T) {
			a := &workflow.Action{Language: "shell", Script: script}
			if lang == "python" {
				a = &workflow.Action{Language: "python", Script: `import json, os, subprocess
print(open(os.environ["APPLIANCE_INPUT"]).read())
print(subprocess.check_output(["cat", os.environ["APPLIANCE_INPUT"]]).decode())
print(json.load(open(os.environ["APPLIANCE_INPUT"]))["name"])`}
			}
			res, out := runLocal(t, testContext(t), "", a, map[string]any{"name": "ada"})
			if res.Error != nil {
				t.Fatal(errText(res))
			}
			got := out.stream(runners.Stdout)
			want := `{"name":"ada"}`
			if len(got) < 3 || got[0] != want || got[len(got)-1] != "ada" {
				t.Fatalf("stdout %q, want the input twice then its name", got)
			}
		})
	}
}

// Inline scripts and input files never outlive the step, in memory or on disk.
func TestStepLeavesNoFilesBehind(t *testing.T) {
	cases := []struct {
		name   string
		action *workflow.Action
	}{
		{"shell in memory", &workflow.Action{Script: "echo hi"}},
		{"node on disk", &workflow.Action{Language: "javascript", Script: "console.log('hi')"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.action.Language == "javascript" {
				requireNode(t)
			}
			tmp := t.TempDir()
			l := New(Config{TempDir: tmp, DepsDir: t.TempDir(), KillGrace: time.Second})
			c.action.Type = workflow.TypeScript
			out := &lines{}
			res := runners.Execute(testContext(t), l, &runners.Step{JobID: "j", Name: "s", Workspace: "w", Dir: t.TempDir(), Action: c.action, Log: out.log})
			if res.Error != nil || !out.has(runners.Stdout, "hi") {
				t.Fatalf("step: %q, stdout %q", errText(res), out.stream(runners.Stdout))
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Fatalf("left behind in the temp dir: %v", left)
			}
		})
	}
}

func TestPathCacheRemembersAndForgets(t *testing.T) {
	lookups := 0
	c := newPathCache(func(name string) (string, error) {
		lookups++
		return "/usr/bin/" + name, nil
	})
	now := time.Now()
	c.now = func() time.Time { return now }
	for i := 0; i < 3; i++ {
		if p, _ := c.LookPath("bash"); p != "/usr/bin/bash" {
			t.Fatalf("path %q", p)
		}
	}
	if lookups != 1 {
		t.Fatalf("%d lookups for three calls, want 1", lookups)
	}
	c.forget("/usr/bin/bash")
	c.LookPath("bash")
	now = now.Add(2 * pathCacheTTL)
	c.LookPath("bash")
	if lookups != 3 {
		t.Fatalf("%d lookups, want 3: one after forget, one after the TTL", lookups)
	}
}
