package engine_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// recordedMetrics is an engine.Metrics that keeps what it was told.
type recordedMetrics struct {
	mu      sync.Mutex
	created []string // workspace/task/source
	ended   []string
	steps   []string // status
	ran     []time.Duration
	waits   []time.Duration
	records int
}

func (m *recordedMetrics) JobCreated(ws, task, source string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.created = append(m.created, ws+"/"+task+"/"+source)
}

func (m *recordedMetrics) JobEnded(status string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ended = append(m.ended, status)
}

func (m *recordedMetrics) StepEnded(status string, ran time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.steps = append(m.steps, status)
	m.ran = append(m.ran, ran)
}

func (m *recordedMetrics) StepClaimed(waited time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.waits = append(m.waits, waited)
}

func (m *recordedMetrics) Committed(commands, records int, took time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if commands < 1 || records < 1 || took < 0 {
		panic("a commit reported without commands or records")
	}
	m.records += records
}

func TestMetricsObserveJobsStepsClaimsAndCommits(t *testing.T) {
	m := &recordedMetrics{}
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}`)), enginetest.Options{Metrics: m})

	job := f.Execute("t", nil)
	f.Clock.Advance(3 * time.Second)
	f.ClaimStep("a")
	if err := f.Engine.StartStep(t.Context(), f.Worker, job, "a"); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(2 * time.Second)
	if err := f.Engine.CompleteStep(t.Context(), f.Worker, job, "a", enginetest.Ok(nil)); err != nil {
		t.Fatal(err)
	}
	f.RunStep("b", enginetest.Fail(1, "boom"))
	f.WaitStatus(job, engine.JobFailed)
	f.Execute("t", nil)
	if err := f.Engine.CancelJob(t.Context(), f.LastJob); err != nil {
		t.Fatal(err)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if want := []string{"main/t/api", "main/t/api"}; !slices.Equal(m.created, want) {
		t.Errorf("created = %q, want %q", m.created, want)
	}
	if want := []string{engine.JobFailed, engine.JobCancelled}; !slices.Equal(m.ended, want) {
		t.Errorf("jobs ended = %q, want %q", m.ended, want)
	}
	if want := []string{engine.StepCompleted, engine.StepFailed, engine.StepCancelled, engine.StepCancelled}; !slices.Equal(m.steps, want) {
		t.Errorf("steps ended = %q, want %q", m.steps, want)
	}
	if len(m.ran) == 0 || m.ran[0] != 2*time.Second {
		t.Errorf("step a ran %v, want 2s", m.ran)
	}
	if len(m.waits) != 2 || m.waits[0] != 3*time.Second {
		t.Errorf("claim waits = %v, want a's 3s then b's", m.waits)
	}
	if m.records == 0 {
		t.Error("no commit observed")
	}
}
