package app

import (
	"os"
	"testing"

	"github.com/appliance-sh/appliance/runners"
)

// TestMain lets this test binary serve as the step keeper, as main does.
func TestMain(m *testing.M) {
	runners.StepKeeperMain()
	os.Exit(m.Run())
}
