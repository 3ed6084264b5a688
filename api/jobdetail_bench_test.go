package api

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/engine"
)

// bigJob is a completed job with a for_each parent and n instances (or n
// flow steps when instances is false), each with a small input and output.
func bigJob(n int, instances bool) (*engine.Job, []*engine.Step) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	j := &engine.Job{ID: "job", Workspace: "ws", TaskName: "fan", Mode: "distributed", Status: engine.JobCompleted,
		SourceType: engine.SourceAPI, CreatedAt: now, StartedAt: &now, CompletedAt: &now, Input: map[string]any{"n": n}}
	steps := []*engine.Step{{JobID: "job", Name: "fan", FlowStep: "fan", Index: -1, ActionName: "ok", ActionType: "script",
		Runner: "local", Status: engine.StepCompleted, StartedAt: &now, CompletedAt: &now}}
	agg := make([]any, n)
	for i := range n {
		agg[i] = map[string]any{"result": fmt.Sprint("out-", i)}
	}
	if instances {
		steps[0].Output = agg // the parent's aggregate
		j.Output = map[string]any{"fan": agg}
	}
	for i := range n {
		name, flow := fmt.Sprintf("fan[%d]", i), "fan"
		if !instances {
			name, flow = fmt.Sprintf("s%d", i), fmt.Sprintf("s%d", i)
		}
		w := "worker-1"
		steps = append(steps, &engine.Step{JobID: "job", Name: name, FlowStep: flow, Index: i, Seq: i + 1, ActionName: "ok",
			ActionType: "script", Runner: "local", Status: engine.StepCompleted, WorkerID: &w, StartedAt: &now, CompletedAt: &now,
			Input: map[string]any{"item": i}, Output: map[string]any{"result": fmt.Sprint("out-", i)}})
	}
	return j, steps
}

// BenchmarkJobDetail10k encodes the detail of a 10,000-instance job (the
// flow steps listed, instances summarized) and, for the encoder's own
// throughput, of a job whose 10,000 steps are all listed.
func BenchmarkJobDetail10k(b *testing.B) {
	e := echo.New()
	for _, bc := range []struct {
		name      string
		instances bool
	}{{"instances", true}, {"listed", false}} {
		b.Run(bc.name, func(b *testing.B) {
			j, steps := bigJob(10000, bc.instances)
			summary, omitted := map[string]int{engine.StepCompleted: len(steps)}, 0
			if bc.instances {
				// What getJob reads for a job over the cap: its flow steps.
				steps, omitted = steps[:1], 10000
			}
			b.ReportAllocs()
			var size int
			for b.Loop() {
				rec := httptest.NewRecorder()
				c := e.NewContext(httptest.NewRequest(http.MethodGet, "/api/jobs/job", nil), rec)
				if err := writeJobDetail(c, j, steps, summary, omitted, []string{"s3cret"}, ""); err != nil {
					b.Fatal(err)
				}
				size = rec.Body.Len()
				io.Discard.Write(rec.Body.Bytes())
			}
			b.ReportMetric(float64(size), "bytes")
		})
	}
}
