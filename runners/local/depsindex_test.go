package local

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
)

// fakeInstaller writes a shell script standing for uv, npm or bun: it
// counts its runs in a file and installs nothing.
func fakeInstaller(t *testing.T, name string) (path string, runs func() int) {
	t.Helper()
	dir := t.TempDir()
	count := filepath.Join(dir, "runs")
	if name == "" {
		name = "installer"
	}
	path = filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho run >> "+count+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, func() int {
		data, _ := os.ReadFile(count)
		return strings.Count(string(data), "run")
	}
}

// installerLookPath finds the real interpreters and the fake installer
// for every installer name.
func installerLookPath(fake, as string) func(string) (string, error) {
	return func(name string) (string, error) {
		switch name {
		case "uv", "npm", "bun":
			if name == as {
				return fake, nil
			}
			return "", exec.ErrNotFound
		}
		return exec.LookPath(name)
	}
}

func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestDependenciesFailAtOnceWithoutAPackageIndex(t *testing.T) {
	// A port nothing listens on, and one that accepts but never answers.
	refused := "http://" + closedPort(t) + "/simple/"
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	hung := "http://" + silent.Addr().String() + "/"

	tests := []struct {
		name, lang, installer, envVar, index string
	}{
		{"python via uv, refused", "python", "uv", "UV_DEFAULT_INDEX", refused},
		{"python via pip, refused", "python", "", "PIP_INDEX_URL", refused},
		{"python, no answer", "python", "uv", "UV_INDEX_URL", hung},
		{"javascript via npm, refused", "javascript", "npm", "npm_config_registry", refused},
		{"javascript via bun, no answer", "javascript", "bun", "BUN_CONFIG_REGISTRY", hung},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.lang == "javascript" {
				requireNode(t)
			}
			fake, runs := fakeInstaller(t, tt.installer)
			deps := t.TempDir()
			l := New(Config{DepsDir: deps, LookPath: installerLookPath(fake, tt.installer),
				Env: append(os.Environ(), tt.envVar+"="+tt.index)})
			l.indexTimeout = 300 * time.Millisecond
			a := &workflow.Action{Type: "script", Language: tt.lang, Dependencies: []string{"left-pad", "requests==2.0"}, Script: "print(1)"}
			if tt.lang == "javascript" {
				a.Script = "console.log(1)"
			}
			start := time.Now()
			res := runners.Execute(testContext(t), l, &runners.Step{Name: "s", Revision: "r1", Dir: t.TempDir(), Action: a, Log: (&lines{}).log})
			took := time.Since(start)
			want := fmt.Sprintf("%s: dependencies left-pad requests==2.0: no package index reachable at %s within 300ms", tt.lang, tt.index)
			if !strings.HasPrefix(errText(res), want) {
				t.Fatalf("error %q, want it to start %q", errText(res), want)
			}
			if took > 3*time.Second {
				t.Errorf("took %v to fail, want about the 300ms check", took)
			}
			if n := runs(); n != 0 {
				t.Errorf("the installer ran %d times without an index", n)
			}
			if entries, _ := os.ReadDir(deps); len(entries) != 0 {
				t.Errorf("a failed check left %v in the cache", entries)
			}
		})
	}
}

func TestDependenciesAreCachedPerRevision(t *testing.T) {
	requireNode(t)
	var checks atomic.Int32
	index := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checks.Add(1)
		w.WriteHeader(http.StatusNotFound) // an index that answers is enough
	}))
	t.Cleanup(index.Close)
	fake, runs := fakeInstaller(t, "npm")
	l := New(Config{DepsDir: t.TempDir(), LookPath: installerLookPath(fake, "npm"),
		Env: append(os.Environ(), "npm_config_registry="+index.URL+"/")})
	a := &workflow.Action{Type: "script", Language: "javascript", Dependencies: []string{"left-pad"}, Script: "console.log('OUTPUT: {\"ok\": true}')"}
	for i, rev := range []string{"r1", "r1", "r2", "r1", "r2"} {
		out := &lines{}
		res := runners.Execute(testContext(t), l, &runners.Step{Name: "s", Workspace: "ws", Revision: rev, Dir: t.TempDir(), Action: a, Log: out.log})
		if res.Error != nil || res.Output["ok"] != true {
			t.Fatalf("run %d (%s): output %v error %q, log %v", i, rev, res.Output, errText(res), append(out.stream(runners.Stdout), out.stream(runners.Stderr)...))
		}
	}
	if n := runs(); n != 2 {
		t.Errorf("installed %d times over revisions r1 r1 r2 r1 r2, want 2 (once per revision)", n)
	}
	if n := checks.Load(); n != 2 {
		t.Errorf("the index was checked %d times, want 2 (only before an install)", n)
	}
}
