package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store"
)

// sweptJobs is how many old ended jobs BenchmarkClaimLatencyWhileSweeping
// has the sweeper delete.
const sweptJobs = 100_000

// seedEndedJobs writes n jobs that ended 60 days ago, two steps each (one
// claimed by a worker, so the worker-steps index has its share), straight
// into the store: creating them through the orchestrator would take
// minutes.
func seedEndedJobs(b *testing.B, path string, n int) {
	b.Helper()
	db, err := store.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	old := time.Now().UTC().Add(-60 * 24 * time.Hour)
	worker := "old-worker"
	const perCommit = 5000
	for start := 0; start < n; start += perCommit {
		batch := &engine.Batch{}
		for i := start; i < min(n, start+perCommit); i++ {
			at := old.Add(time.Duration(i) * time.Millisecond)
			id := fmt.Sprintf("old-%06d", i)
			batch.Jobs = append(batch.Jobs, &engine.Job{ID: id, Workspace: "bench", TaskName: "one", Mode: "distributed",
				Status: engine.JobCompleted, SourceType: engine.SourceAPI, CreatedAt: at, StartedAt: &at, CompletedAt: &at})
			for s, name := range []string{"a", "b"} {
				st := &engine.Step{JobID: id, Name: name, FlowStep: name, Index: -1, Seq: s, ActionName: name,
					ActionType: "script", Runner: "local", Status: engine.StepCompleted, CompletedAt: &at}
				if s == 0 {
					st.WorkerID, st.ReadyAt, st.StartedAt = &worker, &at, &at
				}
				batch.Steps = append(batch.Steps, st)
			}
		}
		if err := db.Commit(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimLatencyWhileSweeping times step-ready -> claimed for an
// idle remote worker (as BenchmarkRemoteClaimLatency) on a server holding
// 100,000 old ended jobs: "no-sweep" with no retention, "sweeping" while
// the retention sweeper deletes them all (claims are timed until the last
// is gone). Each sub-benchmark runs once (its setup is the expensive part).
// It also reports how long CreateJob took, as the sweep's transactions
// delay the orchestrator's commits, not its claims.
func BenchmarkClaimLatencyWhileSweeping(b *testing.B) {
	for _, sweep := range []bool{false, true} {
		name := "no-sweep"
		if sweep {
			name = "sweeping"
		}
		b.Run(name, func(b *testing.B) { claimLatencyOverOldJobs(b, sweep) })
	}
}

func claimLatencyOverOldJobs(b *testing.B, sweep bool) {
	dir := b.TempDir()
	writeWorkspace(b, dir, chainWorkspace(1))
	cfg := testServerConfig(b, map[string]string{"bench": dir}, 0, func(c *config.Server) {
		c.WorkerToken = workerToken
		if sweep {
			c.Effective.Retention = store.Retention{Jobs: 30 * 24 * time.Hour}
		}
	})
	seedEndedJobs(b, cfg.DBPath(), sweptJobs)
	srv, err := startServer(context.Background(), cfg, testLogger(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			b.Errorf("shutdown: %v", err)
		}
	})
	url := "http://" + srv.Addr()
	eng := srv.engine
	w := registerRawWorker(b, url)
	ctx := context.Background()
	// left is how many of the old jobs remain (the benchmark's own jobs
	// are counted in the total too).
	created := 0
	left := func() int {
		_, total, err := srv.db.Jobs(ctx, engine.JobFilter{Limit: 1})
		if err != nil {
			b.Fatal(err)
		}
		return total - created
	}

	const minClaims = 300
	lat := make([]time.Duration, 0, 4096)
	var commits []time.Duration // CreateJob: one orchestrator commit each
	b.ResetTimer()
	began := time.Now()
	var sweepTook time.Duration
	for {
		if sweep && sweepTook == 0 && left() == 0 {
			sweepTook = time.Since(began)
		}
		if len(lat) >= minClaims && (!sweep || sweepTook > 0) {
			break
		}
		got := make(chan claimArrival, 1)
		go w.claim(got)
		deadline := time.Now().Add(10 * time.Second)
		for eng.ParkedClaims() != 1 {
			if time.Now().After(deadline) {
				b.Fatal("the claim never parked")
			}
		}
		asked := time.Now()
		j, err := eng.CreateJob(ctx, engine.CreateJob{Workspace: "bench", Task: "one"})
		ready := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		created++
		a := <-got
		if a.err != nil {
			b.Fatal(a.err)
		}
		if a.jobID != j.ID {
			b.Fatalf("claimed job %s, want %s", a.jobID, j.ID)
		}
		// Only claims made while old jobs were still being deleted count
		// for the sweeping case.
		if !sweep || sweepTook == 0 {
			lat = append(lat, a.at.Sub(ready))
			commits = append(commits, ready.Sub(asked))
		}
		if err := w.finish(a); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if !sweep && left() != sweptJobs {
		b.Fatalf("%d old jobs left without a retention, want %d", left(), sweptJobs)
	}
	slices.Sort(lat)
	slices.Sort(commits)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(commits[len(commits)/2]), "ms/create-median")
	b.ReportMetric(ms(commits[len(commits)*99/100]), "ms/create-p99")
	b.ReportMetric(float64(len(lat)), "claims")
	b.ReportMetric(ms(lat[len(lat)/2]), "ms/claim-median")
	b.ReportMetric(ms(lat[len(lat)*9/10]), "ms/claim-p90")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "ms/claim-p99")
	b.ReportMetric(ms(lat[len(lat)-1]), "ms/claim-max")
	if sweep {
		b.ReportMetric(sweepTook.Seconds(), "s/sweep-100k")
	}
}
