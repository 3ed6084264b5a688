package local

import (
	"os"
	"os/exec"
	"testing"

	"github.com/appliance-sh/appliance/runners/runnertest"
)

// lines collects a step's output lines for assertions (runnertest.Lines
// under the names these tests use).
type lines struct{ runnertest.Lines }

func (l *lines) log(stream, line string)      { l.Log(stream, line) }
func (l *lines) stream(name string) []string  { return l.Stream(name) }
func (l *lines) has(stream, line string) bool { return l.Has(stream, line) }

var (
	eventually  = runnertest.Eventually
	testContext = runnertest.Context
	errText     = runnertest.ErrText
	writeFile   = runnertest.WriteFile
)

// requireNode skips a test that runs node when it is not installed, except
// under APPLIANCE_REQUIRE_NODE=1 (CI installs it), where that is a failure.
func requireNode(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("APPLIANCE_REQUIRE_NODE") == "1" {
			t.Fatalf("node is required (APPLIANCE_REQUIRE_NODE=1) but not found: %v", err)
		}
		t.Skip("node is not installed (set APPLIANCE_REQUIRE_NODE=1 to require it)")
	}
}
