package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/engine"
)

// BenchmarkJobsPageAtDepth is the job list page as a user reads it: GET
// /api/jobs?limit=50&cursor=... half-way down 1,000,000 jobs, on each
// store, from the request to the decoded answer. The jobs are committed
// through the store the server runs on (ended ones, as a long-lived
// server holds), after it started; the store packages'
// BenchmarkJobsCursorAtDepth measures the store's part alone. Set
// APPLIANCE_BENCH_JOBS to build fewer.
func BenchmarkJobsPageAtDepth(b *testing.B) {
	total := 1_000_000
	if n, err := strconv.Atoi(os.Getenv("APPLIANCE_BENCH_JOBS")); err == nil && n > 0 {
		total = n
	}
	benchStores(b, func(b *testing.B, storage ...func(*config.Server)) {
		f := benchFixture(b, 0, storage...)
		ctx := context.Background()
		t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		job := func(i int) *engine.Job {
			created := t0.Add(time.Duration(i) * time.Second)
			ended := created.Add(time.Second)
			return &engine.Job{
				ID: fmt.Sprintf("job-%07d", i), Workspace: "bench", TaskName: "one", AccessPath: "one",
				Mode: "distributed", Status: []string{engine.JobCompleted, engine.JobFailed}[i%2],
				SourceType: engine.SourceAPI, Input: map[string]any{"n": float64(i)},
				CreatedAt: created, StartedAt: &created, CompletedAt: &ended,
			}
		}
		built := time.Now()
		const per = 50_000
		for start := 0; start < total; start += per {
			batch := &engine.Batch{}
			for i := start; i < min(start+per, total); i++ {
				batch.Jobs = append(batch.Jobs, job(i))
			}
			if err := f.srv.db.Commit(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		b.Logf("%d jobs committed in %v", total, time.Since(built).Round(time.Millisecond))
		depth := total / 2
		page := f.url + "/api/jobs?limit=50&cursor=" + url.QueryEscape(engine.CursorOf(job(total-depth)))
		first := fmt.Sprintf("job-%07d", total-depth-1)
		var list struct {
			Items []struct {
				JobID string `json:"job_id"`
			} `json:"items"`
			Total int `json:"total"`
		}
		for b.Loop() {
			resp, err := testClient.Get(page)
			if err != nil {
				b.Fatal(err)
			}
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("GET %s: %d %s, %v", page, resp.StatusCode, raw, err)
			}
			if err := json.Unmarshal(raw, &list); err != nil {
				b.Fatal(err)
			}
			if len(list.Items) != 50 || list.Items[0].JobID != first || list.Total != total {
				b.Fatalf("page: %d jobs from %v of %d; want 50 from %s of %d", len(list.Items), list.Items[:min(1, len(list.Items))], list.Total, first, total)
			}
		}
	})
}
