package postgres_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
	"github.com/appliance-sh/appliance/store/postgres"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

const pipelineYAML = `
actions:
  ok:
    type: script
    script: "true"
tasks:
  t:
    flow:
      prep: {action: ok}
      fan:
        action: ok
        for_each: "{{ range(300) }}"
        depends_on: [prep]
      after: {action: ok, depends_on: [fan]}
`

// pgEngine is a real engine over the PostgreSQL store, with the harness's
// clock, workspaces and logs, and an in-process worker.
type pgEngine struct {
	e      *engine.Engine
	worker string
	cancel context.CancelFunc
	done   chan error
}

func startEngine(t *testing.T, db *postgres.DB, wss *enginetest.Workspaces, clock *enginetest.Clock) *pgEngine {
	t.Helper()
	e, err := engine.New(engine.Config{Store: db, Workspaces: wss, Logs: enginetest.NewLogs(), Clock: clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RunnerTag: enginetest.TestRunnerTag})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &pgEngine{e: e, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- e.Run(ctx) }()
	if err := e.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if p.worker, err = e.RegisterWorker(ctx, "pg", nil, true, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return p
}

func (p *pgEngine) stop() {
	if p.cancel != nil {
		p.cancel()
		<-p.done
		p.cancel = nil
	}
}

// runReady claims, starts and completes every step the engine hands out
// until it has none or n were run; it returns how many ran.
func (p *pgEngine) runReady(t *testing.T, n int) int {
	t.Helper()
	ctx := context.Background()
	ran := 0
	for ran < n {
		c, err := p.e.Claim(ctx, p.worker, 0)
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			return ran
		}
		if err := p.e.StartStep(ctx, p.worker, c.JobID, c.StepName); err != nil {
			t.Fatal(err)
		}
		if err := p.e.CompleteStep(ctx, p.worker, c.JobID, c.StepName, engine.StepResult{Output: map[string]any{"step": c.StepName}}); err != nil {
			t.Fatal(err)
		}
		ran++
	}
	return ran
}

// A job of a chain and a 300-instance for_each runs to completion on an
// engine over PostgreSQL, across a restart of the engine and its store
// half-way: what the first engine committed is what the second loads and
// finishes, and the lists, counts and step pages read it back.
func TestEngineRunsAJobOverPostgreSQLAcrossARestart(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	wss := enginetest.NewWorkspaces(enginetest.LoadWorkspace(t, pipelineYAML))
	clock := enginetest.NewClock(enginetest.Epoch)
	db := open(t, dsn)
	p := startEngine(t, db, wss, clock)
	job, err := p.e.CreateJob(ctx, engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	deadline := time.Now().Add(30 * time.Second)
	for ran < 151 && time.Now().Before(deadline) { // prep and half the instances
		if err := p.e.Idle(ctx); err != nil {
			t.Fatal(err)
		}
		ran += p.runReady(t, 151-ran)
	}
	if err := p.e.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	p.stop()
	_ = db.Close()

	db = open(t, dsn)
	p = startEngine(t, db, wss, clock)
	sum, err := p.e.StepSummary(ctx, job.ID)
	if err != nil || sum[engine.StepCompleted] != ran {
		t.Fatalf("after the restart, steps completed: %v (%v), want %d", sum, err, ran)
	}
	for time.Now().Before(deadline) {
		if err := p.e.Idle(ctx); err != nil {
			t.Fatal(err)
		}
		if p.runReady(t, 1000) == 0 {
			j, _, err := p.e.Job(ctx, job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if engine.JobTerminal(j.Status) {
				break
			}
		}
	}
	j, steps, err := p.e.Job(ctx, job.ID)
	if err != nil || j.Status != engine.JobCompleted {
		t.Fatalf("job after the run: %+v, %v; want completed", j, err)
	}
	if len(steps) != 303 {
		t.Errorf("steps: %d, want 303 (prep, fan, its 300 instances, after)", len(steps))
	}
	if sum, _ := db.StepSummary(ctx, job.ID); sum[engine.StepCompleted] != 303 || len(sum) != 1 {
		t.Errorf("step summary read from the database: %v, want 303 completed", sum)
	}
	jobs, total, err := db.Jobs(ctx, engine.JobFilter{Statuses: []string{engine.JobCompleted}})
	if err != nil || total != 1 || len(jobs) != 1 || jobs[0].ID != job.ID {
		t.Errorf("completed jobs: %d (total %d), %v", len(jobs), total, err)
	}
	page, err := db.StepsPage(ctx, job.ID, engine.StepQuery{After: -1, Limit: 10, FlowOnly: true})
	if err != nil || fmt.Sprint(names(page)) != "[prep fan after]" {
		t.Errorf("flow steps: %v, %v", names(page), err)
	}
	active, _, _, err := db.LoadActive(ctx)
	if err != nil || len(active) != 0 {
		t.Errorf("active jobs once it ended: %d, %v", len(active), err)
	}
}

func names(steps []*engine.Step) []string {
	out := []string{}
	for _, s := range steps {
		out = append(out, s.Name)
	}
	return out
}
