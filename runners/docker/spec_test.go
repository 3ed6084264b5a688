package docker

import (
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
)

func TestParseCPUQuantities(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		err  string
	}{
		{in: "1", want: 1e9},
		{in: "0.5", want: 5e8},
		{in: "500m", want: 5e8},
		{in: "2500m", want: 25e8},
		{in: " 2 ", want: 2e9},
		{in: "0", err: "want cores"},
		{in: "-1", err: "want cores"},
		{in: "lots", err: "want cores"},
		{in: "0.5m", err: "less than 1m"},
	}
	for _, tc := range cases {
		got, err := parseCPU(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseCPU(%q) = %d, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseCPU(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseMemoryQuantities(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		err  string
	}{
		{in: "64Mi", want: 64 << 20},
		{in: "1Gi", want: 1 << 30},
		{in: "1.5Gi", want: 3 << 29},
		{in: "512M", want: 512e6},
		{in: "1G", want: 1e9},
		{in: "10000000", want: 1e7},
		{in: "8192Ki", want: 8 << 20},
		{in: "1Ki", err: "at least 6Mi"},
		{in: "Mi", err: "want bytes"},
		{in: "1Xi", err: "want bytes"},
		{in: "-64Mi", err: "want bytes"},
		{in: "9999999Ti", err: "too large"},
	}
	for _, tc := range cases {
		got, err := parseMemory(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseMemory(%q) = %d, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseMemory(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestDockerSpecRefusesActionsItCannotRun(t *testing.T) {
	d, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		action *workflow.Action
		err    string
	}{
		{"no action", nil, "has no action"},
		{"docker without image", &workflow.Action{Type: workflow.TypeDocker, Cmd: "true"}, "needs an image"},
		{"cmd with entrypoint", &workflow.Action{Type: workflow.TypeDocker, Image: "x", Cmd: "true", Entrypoint: []string{"sh"}}, "cmd cannot be combined"},
		{"task action", &workflow.Action{Type: workflow.TypeTask, Task: "t"}, "cannot run task actions"},
		{"script and source", &workflow.Action{Type: workflow.TypeScript, Script: "x", Source: "y"}, "exactly one of script and source"},
		{"dependencies", &workflow.Action{Type: workflow.TypeScript, Script: "x", Language: "python", Dependencies: []string{"requests"}}, "dependencies are not supported with runner docker"},
		{"unknown language", &workflow.Action{Type: workflow.TypeScript, Script: "x", Language: "cobol"}, `unsupported language "cobol"`},
		{"workdir leaving the workspace", &workflow.Action{Type: workflow.TypeScript, Script: "x", Workdir: "../etc"}, "leaves the workspace"},
		{"missing workdir", &workflow.Action{Type: workflow.TypeScript, Script: "x", Workdir: "nope"}, "no such directory"},
		{"missing source", &workflow.Action{Type: workflow.TypeScript, Source: "nope.sh"}, "not found in the workspace"},
		{"bad memory", &workflow.Action{Type: workflow.TypeDocker, Image: "x", Resources: &workflow.Resources{Memory: "lots"}}, "resources.memory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.specFor(&runners.Step{Name: "s", Dir: t.TempDir(), Action: tc.action})
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("specFor error = %v, want one containing %q", err, tc.err)
			}
		})
	}
}

func TestDockerScriptImagesDefaultPerLanguageAndFollowConfig(t *testing.T) {
	d, err := New(Config{Images: map[string]string{"py": "my/python:3.12"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		language, image, interp string
	}{
		{"", "debian:stable-slim", "sh"},
		{"python", "my/python:3.12", "python3"},
		{"js", "node:lts-slim", "node"},
		{"typescript", "denoland/deno:latest", "deno"},
		{"go", "golang:1", "go"},
	}
	for _, tc := range cases {
		spec, err := d.specFor(&runners.Step{Name: "s", Dir: t.TempDir(), Action: &workflow.Action{
			Type: workflow.TypeScript, Runner: "docker", Script: "x", Language: tc.language,
		}})
		if err != nil {
			t.Fatalf("language %q: %v", tc.language, err)
		}
		if got := spec.opts.Config.Image; got != tc.image {
			t.Errorf("language %q: image %q, want %q", tc.language, got, tc.image)
		}
		if got := spec.opts.Config.Entrypoint[0]; got != tc.interp {
			t.Errorf("language %q: runs %q, want %q", tc.language, got, tc.interp)
		}
	}
	if _, err := New(Config{Images: map[string]string{"cobol": "x"}}); err == nil {
		t.Error("an image for an unknown language was accepted")
	}
}
