package engine_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// The `_server` line that says why a step or job ended is stored before
// the store says it ended: a reader who sees the job ended finds why in
// its log at once. Each way a step ends with a reason is checked: the
// log sink looks at the store as the line arrives.
func TestServerLineIsStoredBeforeTheJobIsSeenEnded(t *testing.T) {
	cases := []struct {
		name   string
		flow   string
		status string
		line   string // what the ending line contains
		end    func(t *testing.T, f *enginetest.Fixture, job string)
	}{
		{"lost worker", `long: {action: ok}`, engine.JobFailed, `step "long" failed: Worker heartbeat timeout`,
			func(t *testing.T, f *enginetest.Fixture, job string) {
				remote := f.Register("edge", nil, false)
				c, err := f.Engine.Claim(t.Context(), remote, 0)
				if err != nil || c == nil {
					t.Fatalf("claim = %+v, %v", c, err)
				}
				if err := f.Engine.StartStep(t.Context(), remote, job, "long"); err != nil {
					t.Fatal(err)
				}
				f.Clock.Advance(2 * time.Minute)
			}},
		{"step timeout", `long: {action: ok, timeout: 30s}`, engine.JobFailed, "Step timed out after 30s",
			func(t *testing.T, f *enginetest.Fixture, job string) {
				claimAndStart(t, f, job, "long")
				f.Clock.Advance(30 * time.Second)
			}},
		{"cancel", `long: {action: ok}`, engine.JobCancelled, "job cancelled",
			func(t *testing.T, f *enginetest.Fixture, job string) {
				claimAndStart(t, f, job, "long")
				if err := f.Engine.CancelJob(t.Context(), job); err != nil {
					t.Fatal(err)
				}
			}},
		{"render error", `
first: {action: ok}
long: {action: greet, depends_on: [first], input: {name: "{{ nope.output.x }}"}}`, engine.JobFailed, `step "long" failed:`,
			func(t *testing.T, f *enginetest.Fixture, job string) {
				f.RunJobStep(job, "first", enginetest.Ok(nil))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(tc.flow)),
				enginetest.Options{NoWorker: tc.name == "lost worker", HeartbeatTimeout: 90 * time.Second})
			var mu sync.Mutex
			seen := map[string]string{} // ending line → the job's stored status as it arrived
			f.Logs.BeforeAppend(func(jobID string, lines []engine.LogLine) {
				for _, l := range lines {
					if l.Step != engine.ServerStep || !strings.Contains(l.Line, tc.line) {
						continue
					}
					j, err := f.Store.Job(t.Context(), jobID)
					status := "not stored"
					if err == nil {
						status = j.Status
					}
					mu.Lock()
					seen[l.Line] = status
					mu.Unlock()
				}
			})
			job := f.Execute("t", nil)
			tc.end(t, f, job)
			f.WaitStatus(job, tc.status)
			var found bool
			for _, l := range f.Logs.ServerLines(job) {
				found = found || strings.Contains(l, tc.line)
			}
			if !found {
				t.Fatalf("job is %s but its log has no line with %q: %q", tc.status, tc.line, f.Logs.ServerLines(job))
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) == 0 {
				t.Fatalf("the sink never saw a line with %q", tc.line)
			}
			for line, status := range seen {
				if engine.JobTerminal(status) {
					t.Errorf("line %q was stored after the job was already stored %s", line, status)
				}
			}
		})
	}
}
