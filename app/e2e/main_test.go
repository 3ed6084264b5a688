package e2e

import (
	"os"
	"testing"

	"github.com/appliance-sh/appliance/runners/local"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

// TestMain lets this test binary serve as the step keeper, as main does,
// and stops the PostgreSQL clusters the tests and benchmarks started.
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
