package local

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
)

// tsWays are the ways to run TypeScript found on this machine (bun, deno,
// tsc with node), each run by the tests on its own. None skips the test,
// except under APPLIANCE_REQUIRE_NODE=1, where CI installs Debian's nodejs
// and node-typescript and the tsc way must be there.
func tsWays(t *testing.T) []string {
	t.Helper()
	var ways []string
	for _, name := range interpreters["typescript"] {
		if _, err := exec.LookPath(name); err != nil {
			continue
		}
		if c := companions[name]; c != "" {
			if _, err := exec.LookPath(c); err != nil {
				continue
			}
		}
		ways = append(ways, name)
	}
	if os.Getenv("APPLIANCE_REQUIRE_NODE") == "1" && !strings.Contains(strings.Join(ways, " "), "tsc") {
		t.Fatalf("tsc and node are required (APPLIANCE_REQUIRE_NODE=1) but not both found; apt-get install nodejs node-typescript")
	}
	if len(ways) == 0 {
		t.Skip("no TypeScript runner: none of bun, deno, tsc with node is installed (set APPLIANCE_REQUIRE_NODE=1 to require tsc and node)")
	}
	return ways
}

// onlyWay is a LookPath that hides every TypeScript interpreter but way.
func onlyWay(way string) func(string) (string, error) {
	return func(name string) (string, error) {
		for _, other := range interpreters["typescript"] {
			if name == other && name != way {
				return "", exec.ErrNotFound
			}
		}
		return exec.LookPath(name)
	}
}

// eachTSWay runs f as a subtest per way, with a runner using only that way.
func eachTSWay(t *testing.T, f func(t *testing.T, l *Runner)) {
	for _, way := range tsWays(t) {
		t.Run(way, func(t *testing.T) {
			f(t, New(Config{DepsDir: t.TempDir(), TempDir: t.TempDir(), KillGrace: 500 * time.Millisecond, LookPath: onlyWay(way)}))
		})
	}
}

func runTS(t *testing.T, ctx context.Context, l *Runner, dir string, a *workflow.Action, input map[string]any) (runners.Result, *lines) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	a.Type, a.Language = workflow.TypeScript, "typescript"
	out := &lines{}
	res := runners.Execute(ctx, l, &runners.Step{JobID: "job-1", Name: "step-a", Workspace: "ws", Revision: "r1", Dir: dir, Action: a, Input: input, Log: out.log})
	return res, out
}

// A script with types, interfaces and a type error runs (types are
// stripped, not checked), in its workdir, with its input as INPUT_ variables
// and $APPLIANCE_INPUT, reporting its OUTPUT line; it leaves no file behind.
func TestTypeScriptRunsWithTypesAndInput(t *testing.T) {
	eachTSWay(t, func(t *testing.T, l *Runner) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		res, out := runTS(t, testContext(t), l, dir, &workflow.Action{Workdir: "sub", Script: `import * as fs from "node:fs";

interface Input { name: string; n: number }
const input: Input = JSON.parse(fs.readFileSync(process.env.APPLIANCE_INPUT as string, "utf8"));
const unchecked: string = 5 as number; // a type error: not checked
function twice(x: number): number { return 2 * x; }
console.log("warning: none");
console.error("to stderr");
console.log("OUTPUT: " + JSON.stringify({
	sum: twice(input.n) + Number(process.env.INPUT_N),
	name: process.env.INPUT_NAME,
	cwd: process.cwd(),
	unchecked,
	step: process.env.APPLIANCE_STEP,
}));
`}, map[string]any{"name": "ada", "n": 7})
		if res.Error != nil || res.ExitCode != 0 {
			t.Fatalf("exit %d error %q", res.ExitCode, errText(res))
		}
		want := map[string]any{"sum": 21.0, "name": "ada", "cwd": filepath.Join(dir, "sub"), "unchecked": 5.0, "step": "step-a"}
		for k, v := range want {
			if res.Output[k] != v {
				t.Errorf("output[%s] = %v, want %v (output %v)", k, res.Output[k], v, res.Output)
			}
		}
		if !out.has(runners.Stdout, "warning: none") || !out.has(runners.Stderr, "to stderr") {
			t.Errorf("log lines missing or on the wrong stream: %+v", out.All())
		}
		if left, _ := os.ReadDir(l.cfg.TempDir); len(left) != 0 {
			t.Errorf("left behind in the temp dir: %v", left)
		}
	})
}

// A source file in the workspace imports a sibling .ts module and awaits at
// its top level.
func TestTypeScriptSourceImportsSiblingAndAwaits(t *testing.T) {
	eachTSWay(t, func(t *testing.T, l *Runner) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "lib.ts"), "export function greet(who: string): string { return `hello ${who}`; }\n")
		writeFile(t, filepath.Join(dir, "main.ts"), `import { greet } from "./lib.ts";
const later: string = await new Promise<string>((resolve) => setTimeout(() => resolve("later"), 10));
console.log("OUTPUT: " + JSON.stringify({ greeting: greet("ts"), later }));
`)
		res, _ := runTS(t, testContext(t), l, dir, &workflow.Action{Source: "main.ts"}, nil)
		if res.Error != nil || res.Output["greeting"] != "hello ts" || res.Output["later"] != "later" {
			t.Fatalf("output %v error %q", res.Output, errText(res))
		}
	})
}

func TestTypeScriptNonZeroExit(t *testing.T) {
	eachTSWay(t, func(t *testing.T, l *Runner) {
		res, _ := runTS(t, testContext(t), l, "", &workflow.Action{Script: `const code: number = 3;
console.error("giving up with " + code);
process.exit(code);
`}, nil)
		if res.ExitCode != 3 || !strings.HasPrefix(errText(res), "Exit code: 3") || !strings.Contains(errText(res), "giving up with 3") {
			t.Fatalf("exit %d error %q, want exit 3 with the stderr tail", res.ExitCode, errText(res))
		}
	})
}

// A syntax error fails the step with a message naming the script's line.
func TestTypeScriptSyntaxErrorNamesTheLine(t *testing.T) {
	eachTSWay(t, func(t *testing.T, l *Runner) {
		res, out := runTS(t, testContext(t), l, "", &workflow.Action{Script: "const a: number = 1;\nconst b = (a + ;\nconsole.log('OUTPUT: {\"ran\": true}');\n"}, nil)
		if res.ExitCode == 0 || res.Output != nil || !strings.Contains(errText(res), ".ts:2:") {
			t.Fatalf("exit %d output %v error %q, want a failure naming line 2 of the script", res.ExitCode, res.Output, errText(res))
		}
		if out.has(runners.Stdout, `OUTPUT: {"ran": true}`) {
			t.Fatalf("a script with a syntax error ran")
		}
	})
}

func TestTypeScriptTranspileErrorNamesSourceFile(t *testing.T) {
	if _, err := exec.LookPath("tsc"); err != nil {
		tsWays(t) // fails under APPLIANCE_REQUIRE_NODE=1
		t.Skip("tsc is not installed")
	}
	requireNode(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "job.ts"), "let x: number = 1;\n\nx = = 2;\n")
	l := New(Config{DepsDir: t.TempDir(), LookPath: onlyWay("tsc")})
	res, _ := runTS(t, testContext(t), l, dir, &workflow.Action{Source: "job.ts"}, nil)
	if want := "job.ts:3:5: error TS1109: Expression expected."; res.ExitCode != 1 || !strings.Contains(errText(res), want) {
		t.Fatalf("exit %d error %q, want exit 1 and %q", res.ExitCode, errText(res), want)
	}
}

func TestTypeScriptCancelKillsTheProcessGroup(t *testing.T) {
	eachTSWay(t, func(t *testing.T, l *Runner) {
		ctx, cancel := context.WithCancelCause(testContext(t))
		done := make(chan runners.Result, 1)
		out := &lines{}
		go func() {
			done <- runners.Execute(ctx, l, &runners.Step{Name: "s", Dir: t.TempDir(), Log: out.log, Action: &workflow.Action{Type: workflow.TypeScript, Language: "ts",
				Script: `const pgid: number = process.pid; console.log("pgid " + pgid); setInterval(() => {}, 1000);`}})
		}()
		var pgid int
		eventually(t, 20*time.Second, "the script to start", func() bool {
			for _, l := range out.stream(runners.Stdout) {
				if rest, ok := strings.CutPrefix(l, "pgid "); ok {
					pgid, _ = strconv.Atoi(rest)
					return true
				}
			}
			return false
		})
		if pgid == 0 || groupGone(pgid) {
			t.Fatalf("process group %d not running before cancel", pgid)
		}
		cancel(runners.ErrStepCancelled)
		res := <-done
		if errText(res) != runners.ErrStepCancelled.Error() {
			t.Fatalf("error %q, want %q", errText(res), runners.ErrStepCancelled)
		}
		eventually(t, 15*time.Second, "every process of the group to be gone", func() bool { return groupGone(pgid) })
		if left, _ := os.ReadDir(l.cfg.TempDir); len(left) != 0 {
			t.Errorf("left behind in the temp dir: %v", left)
		}
	})
}

// With tsc and node, dependencies install with npm into NODE_PATH, where the
// transpiled script's imports find them.
func TestTypeScriptDependenciesWithTsc(t *testing.T) {
	if _, err := exec.LookPath("tsc"); err != nil {
		tsWays(t)
		t.Skip("tsc is not installed")
	}
	requireNode(t)
	index := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) }))
	t.Cleanup(index.Close)
	// A stand-in npm installs a left-pad into the --prefix it is given.
	npm := filepath.Join(t.TempDir(), "npm")
	writeFile(t, npm, "#!/bin/sh\nmkdir -p node_modules/left-pad && echo 'module.exports = (s, n) => String(s).padStart(n, \"*\");' > node_modules/left-pad/index.js\n")
	if err := os.Chmod(npm, 0o755); err != nil {
		t.Fatal(err)
	}
	tscOnly := onlyWay("tsc")
	l := New(Config{DepsDir: t.TempDir(), Env: append(os.Environ(), "npm_config_registry="+index.URL+"/"),
		LookPath: func(name string) (string, error) {
			if name == "npm" {
				return npm, nil
			}
			return tscOnly(name)
		}})
	res, out := runTS(t, testContext(t), l, "", &workflow.Action{Dependencies: []string{"left-pad"},
		Script: `import leftPad from "left-pad";
const padded: string = leftPad("x", 3);
console.log("OUTPUT: " + JSON.stringify({ padded }));
`}, nil)
	if res.Error != nil || res.Output["padded"] != "**x" {
		t.Fatalf("output %v error %q, log %v", res.Output, errText(res), out.All())
	}
}

// tsc alone does not run a script: without node it is passed over.
func TestTscWithoutNodeIsPassedOver(t *testing.T) {
	look := func(name string) (string, error) {
		if name == "tsc" {
			return "/usr/bin/tsc", nil
		}
		return "", exec.ErrNotFound
	}
	_, err := findInterpreter("typescript", "", look)
	if want := "typescript: no interpreter found (tried bun, deno, tsc with node)"; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
	if _, err := typescriptPackage(filepath.Join(t.TempDir(), "tsc")); err == nil {
		t.Fatal("a missing tsc resolved to a package")
	}
	fake := filepath.Join(t.TempDir(), "bin", "tsc")
	os.MkdirAll(filepath.Dir(fake), 0o755)
	writeFile(t, fake, "")
	if _, err := typescriptPackage(fake); err == nil || !strings.Contains(err.Error(), "is not the bin/tsc of a typescript package") {
		t.Fatalf("error %v for a tsc outside a package", err)
	}
}
