package local

import (
	"archive/zip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
)

// localWheel writes a minimal pure-Python wheel, so pip can install it
// without a network.
func localWheel(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "greetlib-0.1-py3-none-any.whl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for name, body := range map[string]string{
		"greetlib/__init__.py":                 "def greet(n):\n    return 'hello ' + n\n",
		"greetlib-0.1.dist-info/METADATA":      "Metadata-Version: 2.1\nName: greetlib\nVersion: 0.1\n",
		"greetlib-0.1.dist-info/WHEEL":         "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		"greetlib-0.1.dist-info/RECORD":        "",
		"greetlib-0.1.dist-info/top_level.txt": "greetlib\n",
	} {
		w, _ := zw.Create(name)
		w.Write([]byte(body))
	}
	zw.Close()
	f.Close()
	return path
}

func TestPythonDependenciesAreInstalledOnceAndImportable(t *testing.T) {
	if exec.Command("python3", "-m", "pip", "--version").Run() != nil {
		t.Skip("pip is not available for python3")
	}
	wheel := localWheel(t)
	// uv is left out so pip installs; no index, so nothing is fetched.
	noUV := func(name string) (string, error) {
		if name == "uv" {
			return "", exec.ErrNotFound
		}
		return exec.LookPath(name)
	}
	l := New(Config{DepsDir: t.TempDir(), LookPath: noUV, KillGrace: time.Second,
		Env: append(os.Environ(), "PIP_NO_INDEX=1")})
	a := &workflow.Action{Type: "script", Language: "python", Dependencies: []string{wheel},
		Script: "import greetlib, json\nprint('OUTPUT: ' + json.dumps({'msg': greetlib.greet('deps')}))"}
	for run := 1; run <= 2; run++ {
		out := &lines{}
		res := runners.Execute(testContext(t), l, &runners.Step{Name: "s", Dir: t.TempDir(), Action: a, Log: out.log})
		if res.Error != nil || res.Output["msg"] != "hello deps" {
			t.Fatalf("run %d: output %v error %q", run, res.Output, errText(res))
		}
		installed := false
		for _, line := range out.stream(runners.Stderr) {
			installed = installed || strings.HasPrefix(line, "installing dependencies:")
		}
		if installed != (run == 1) {
			t.Fatalf("run %d: installed=%v; want an install on the first run only", run, installed)
		}
	}
}

func TestFailedDependencyInstallIsNotCached(t *testing.T) {
	if exec.Command("python3", "-m", "pip", "--version").Run() != nil {
		t.Skip("pip is not available for python3")
	}
	deps := t.TempDir()
	l := New(Config{DepsDir: deps, Env: append(os.Environ(), "PIP_NO_INDEX=1"),
		LookPath: func(name string) (string, error) {
			if name == "uv" {
				return "", exec.ErrNotFound
			}
			return exec.LookPath(name)
		}})
	a := &workflow.Action{Type: "script", Language: "python", Dependencies: []string{"surely-not-a-package-xyz"}, Script: "print(1)"}
	res := runners.Execute(testContext(t), l, &runners.Step{Name: "s", Dir: t.TempDir(), Action: a, Log: (&lines{}).log})
	if !strings.Contains(errText(res), "python: install dependencies surely-not-a-package-xyz: installer exited with code") {
		t.Fatalf("error %q", errText(res))
	}
	if entries, _ := os.ReadDir(deps); len(entries) != 0 {
		t.Fatalf("a failed install left %v in the cache", entries)
	}
}
