package worker

import "github.com/appliance-sh/appliance/runners/runnertest"

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
