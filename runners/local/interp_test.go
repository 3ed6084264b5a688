package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
)

// TestShellFallsBackToBusybox: on a minimal image with neither bash nor
// sh on PATH, a shell script runs with `busybox sh`.
func TestShellFallsBackToBusybox(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	// A stand-in busybox that accepts only its sh applet.
	fake := filepath.Join(t.TempDir(), "busybox")
	if err := os.WriteFile(fake, []byte("#!"+sh+"\n[ \"$1\" = sh ] || exit 9\nshift\nexec "+sh+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	lookPath := func(name string) (string, error) {
		if name == "busybox" {
			return fake, nil
		}
		return "", exec.ErrNotFound
	}
	a := workflow.Action{Type: workflow.TypeScript, Script: "echo \"from $0\""}
	out := &lines{}
	res := runners.Execute(testContext(t), New(Config{LookPath: lookPath}), &runners.Step{Name: "s", Dir: t.TempDir(), Action: &a, Log: out.log})
	if res.Error != nil || res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, errText(res))
	}
	if got := out.stream(runners.Stdout); len(got) != 1 || filepath.Ext(got[0]) != ".sh" {
		t.Errorf("stdout %q, want the script run by busybox's sh", got)
	}
	if args := runners.ScriptArgs(fake, "s.sh"); !slices.Equal(args, []string{fake, "sh", "s.sh"}) {
		t.Errorf("ScriptArgs = %q", args)
	}
}
