package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// BenchmarkForEachBinary runs one job of n for_each instances of `true`
// on the real binary with 4 local worker slots, and reports instances per
// second and the server's peak RSS. The interface caps one for_each at
// 10,000 items, so 100k is ten for_each steps of 10,000 in one job.
// APPLIANCE_BENCH_FOREACH (e.g. "1000,10000") picks the sizes.
func BenchmarkForEachBinary(b *testing.B) {
	sizes := []int{1000, 10000, 100000}
	if v := os.Getenv("APPLIANCE_BENCH_FOREACH"); v != "" {
		sizes = nil
		for _, s := range strings.Split(v, ",") {
			var n int
			fmt.Sscan(s, &n)
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			per := min(n, 10000)
			var ws strings.Builder
			ws.WriteString("tasks:\n  fan:\n    flow:\n")
			for s := range n / per {
				fmt.Fprintf(&ws, "      fan%d:\n        type: script\n        script: \"true\"\n        for_each: \"{{ range(%d) | list }}\"\n", s, per)
			}
			p := startBinaryServer(b, ws.String(), 4)
			url := "http://" + p.addr
			var elapsed time.Duration
			for b.Loop() {
				var out struct {
					JobID string `json:"job_id"`
				}
				start := time.Now()
				if code := do(b, "POST", url+"/api/workspaces/ws/tasks/fan/execute", map[string]any{}, &out); code != 200 {
					b.Fatalf("execute: %d", code)
				}
				deadline := start.Add(30 * time.Minute)
				// The list's newest job is this one: a cheap poll, where
				// the detail would read every step each time.
				for {
					var page struct {
						Items []struct {
							Status string `json:"status"`
						} `json:"items"`
					}
					do(b, "GET", url+"/api/jobs?limit=1", nil, &page)
					if len(page.Items) == 1 && page.Items[0].Status != "pending" && page.Items[0].Status != "running" {
						break
					}
					if time.Now().After(deadline) {
						b.Fatalf("job %s did not end", out.JobID)
					}
					time.Sleep(100 * time.Millisecond)
				}
				took := time.Since(start)
				var j struct {
					Status       string         `json:"status"`
					StepsSummary map[string]int `json:"steps_summary"`
				}
				do(b, "GET", url+"/api/jobs/"+out.JobID, nil, &j)
				if j.Status != "completed" || j.StepsSummary["completed"] != n+n/per {
					b.Fatalf("job %s, steps_summary %v; want completed with %d completed steps", j.Status, j.StepsSummary, n+n/per)
				}
				elapsed += took
			}
			peak := peakRSS(b, p.cmd.Process.Pid)
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "steps/s")
			b.ReportMetric(float64(peak)/(1<<20), "server-peak-MB")
			if peak > 1<<30 {
				b.Errorf("server peak RSS %d MB, want under 1 GB", peak>>20)
			}
		})
	}
}
