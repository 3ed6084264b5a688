package app

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/runners/local"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

// TestMain lets this test binary serve as the step keeper, as main does,
// and stops the PostgreSQL cluster the storage tests started, if any.
func TestMain(m *testing.M) {
	local.StepKeeperMain()
	// In-process client commands read stored logins from the user config
	// dir: never the developer's own.
	dir, err := os.MkdirTemp("", "appliance-test-config-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	code := pgtest.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestMainUsage(t *testing.T) {
	var out, errOut strings.Builder
	if code := Main([]string{"--help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "serve") ||
		!strings.Contains(out.String(), "migrate --config FILE [--dry-run]") {
		t.Fatalf("--help: exit %d, stdout %q", code, out.String())
	}
	out.Reset()
	if code := Main([]string{"frobnicate"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown command "frobnicate"`) {
		t.Fatalf("unknown command: exit %d, stderr %q", code, errOut.String())
	}
}

// runMain runs the appliance command in this process.
func runMain(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}
