package local

import (
	"os"
	"testing"
)

// TestMain lets this test binary serve as the step keeper, as main does.
func TestMain(m *testing.M) {
	StepKeeperMain()
	os.Exit(m.Run())
}
