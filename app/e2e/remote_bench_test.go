package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api/workerproto"
	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/engine"
)

// rawWorker speaks the worker protocol over HTTP itself, so a benchmark
// times the protocol and the server, not the worker loop.
type rawWorker struct {
	url, id, secret string
	http            *http.Client
	held            []map[string]any // results for the next claim (claimCarrying)
}

// registerRawWorker registers a rawWorker named bench, with no tags.
func registerRawWorker(b *testing.B, url string) *rawWorker {
	b.Helper()
	w := &rawWorker{url: url, http: &http.Client{}}
	var reg struct {
		WorkerID string `json:"worker_id"`
		Secret   string `json:"worker_secret"`
	}
	if err := w.post("/worker/register", map[string]any{"name": "bench", "tags": []string{}, "want_secret": true}, &reg); err != nil {
		b.Fatal(err)
	}
	w.id, w.secret = reg.WorkerID, reg.Secret
	return w
}

func (w *rawWorker) post(path string, body, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest("POST", w.url+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+workerToken)
	if w.secret != "" {
		req.Header.Set(workerproto.SecretHeader, w.secret)
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("POST %s: status %d", path, resp.StatusCode)
	}
	if out == nil {
		out = &struct{}{}
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

type claimArrival struct {
	jobID, step string
	at          time.Time
	err         error
}

// claim long-polls for a step and notes when the answer arrived.
func (w *rawWorker) claim(got chan<- claimArrival) {
	var out struct {
		JobID    *string `json:"job_id"`
		StepName *string `json:"step_name"`
	}
	err := w.post("/worker/jobs/claim?wait=20", map[string]any{"worker_id": w.id, "tags": []string{}}, &out)
	a := claimArrival{at: time.Now(), err: err}
	if err == nil && out.JobID == nil {
		a.err = fmt.Errorf("claim answered no work")
	}
	if a.err == nil {
		a.jobID, a.step = *out.JobID, *out.StepName
	}
	got <- a
}

// finish starts and completes the claimed step, with exit code 0.
func (w *rawWorker) finish(a claimArrival) error {
	step := "/worker/jobs/" + a.jobID + "/steps/" + a.step
	if err := w.post(step+"/start", map[string]any{"worker_id": w.id}, nil); err != nil {
		return err
	}
	return w.post(step+"/complete", map[string]any{"worker_id": w.id, "output": nil, "exit_code": 0, "error": nil}, nil)
}

// BenchmarkRemoteClaimLatency times step-ready -> claimed for an idle
// remote worker: a claim long-poll is parked at the server (checked, not
// assumed), a one-step job is created, and the latency runs from the
// creation's return (the step is ready, durably, at that point) to the
// claim's answer arriving at the worker over HTTP.
func BenchmarkRemoteClaimLatency(b *testing.B) {
	dir := b.TempDir()
	writeWorkspace(b, dir, chainWorkspace(1))
	f := startFixture(b, map[string]string{"bench": dir}, 0, func(c *config.Server) { c.WorkerToken = workerToken })
	eng := f.srv.engine
	w := registerRawWorker(b, f.url)
	ctx := context.Background()

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		got := make(chan claimArrival, 1)
		go w.claim(got)
		deadline := time.Now().Add(10 * time.Second)
		for eng.ParkedClaims() != 1 {
			if time.Now().After(deadline) {
				b.Fatal("the claim never parked")
			}
		}
		j, err := eng.CreateJob(ctx, engine.CreateJob{Workspace: "bench", Task: "one"})
		ready := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		a := <-got
		if a.err != nil {
			b.Fatal(a.err)
		}
		if a.jobID != j.ID {
			b.Fatalf("claimed job %s, want %s", a.jobID, j.ID)
		}
		lat = append(lat, a.at.Sub(ready))
		if err := w.finish(a); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "ms/claim-median")
	b.ReportMetric(ms(lat[len(lat)*9/10]), "ms/claim-p90")
	b.ReportMetric(ms(lat[len(lat)-1]), "ms/claim-max")
}

// BenchmarkRemoteChain40 runs a 40-step sequential chain of `true` through
// one remote worker process (no in-process workers); reports created_at ->
// completed_at per chain.
func BenchmarkRemoteChain40(b *testing.B) {
	dir := b.TempDir()
	writeWorkspace(b, dir, chainWorkspace(40))
	f := startFixture(b, map[string]string{"bench": dir}, 0, func(c *config.Server) { c.WorkerToken = workerToken })
	// The worker's default intervals: heartbeats and log pushes as deployed.
	spawnWorker(b, f.url, workerToken, "bench", "")
	f.worker("bench")
	// A first chain downloads the workspace; the timed ones find it cached.
	f.waitDone(f.execute("bench", "chain", nil))
	timeChain40(b, f)
}
