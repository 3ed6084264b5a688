package e2e

import (
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/appliance-sh/appliance/app/config"
)

// scrape reads /metrics (with token as bearer unless empty) and parses it
// as a Prometheus scraper would.
func scrape(t testing.TB, url, token string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	req, err := http.NewRequest("GET", url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return resp.StatusCode, nil
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return resp.StatusCode, families
}

// value is the sample of the family whose labels include want (a
// histogram's count); -1 when absent.
func value(fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(want); i += 2 {
			if labels[want[i]] != want[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

const metricsWorkspace = `tasks:
  ok:
    flow:
      a: {type: script, script: echo hello}
      b: {depends_on: [a], type: script, script: echo world}
  bad:
    flow:
      x: {type: script, script: "echo oops; exit 3"}
      y: {depends_on: [x], type: script, script: echo never}
`

func TestMetricsMoveAsJobsRun(t *testing.T) { metricsMoveAsJobsRun(t) }

func metricsMoveAsJobsRun(t *testing.T, storage ...func(*config.Server)) {
	ws := t.TempDir()
	writeWorkspace(t, ws, metricsWorkspace)
	f := startFixture(t, map[string]string{"ws": ws}, 1, storage...)

	_, before := scrape(t, f.url, "")
	if v := value(before, "appliance_jobs_ended_total", "status", "completed"); v > 0 {
		t.Fatalf("jobs ended before any ran: %v", v)
	}
	var ids []string
	for _, task := range []string{"ok", "ok", "bad"} {
		id := f.execute("ws", task, nil)
		f.waitTerminal(id)
		ids = append(ids, id)
	}
	code, fams := scrape(t, f.url, "")
	if code != 200 {
		t.Fatalf("/metrics with auth off: %d, want 200", code)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"appliance_jobs_created_total", []string{"workspace", "ws", "task", "ok", "source_type", "api"}, 2},
		{"appliance_jobs_created_total", []string{"workspace", "ws", "task", "bad", "source_type", "api"}, 1},
		{"appliance_jobs_ended_total", []string{"status", "completed"}, 2},
		{"appliance_jobs_ended_total", []string{"status", "failed"}, 1},
		{"appliance_steps_ended_total", []string{"status", "completed"}, 4},
		{"appliance_steps_ended_total", []string{"status", "failed"}, 1},
		{"appliance_steps_ended_total", []string{"status", "skipped"}, 1},
		{"appliance_step_duration_seconds", []string{"status", "completed"}, 4},
		{"appliance_step_claim_wait_seconds", nil, 5},
		{"appliance_worker_claim_seconds", nil, 0}, // in-process claims are not requests
		{"appliance_steps_ready", nil, 0},
		{"appliance_steps_running", nil, 0},
		{"appliance_jobs_live", nil, 0},
		{"appliance_workers_active", nil, 1},
		{"appliance_orchestrator_up", nil, 1},
		{"appliance_scheduler_lag_seconds", nil, 0},
	} {
		if got := value(fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, name := range []string{"appliance_commit_duration_seconds", "appliance_commit_batch_commands", "appliance_commit_batch_records"} {
		if got := value(fams, name); got < 3 {
			t.Errorf("%s count = %v, want a commit per job at least", name, got)
		}
	}
	// "hello", "world", "oops" at least, after masking.
	if got := value(fams, "appliance_log_appended_bytes_total"); got < float64(len("helloworldoops")) {
		t.Errorf("log bytes = %v", got)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_resident_memory_bytes"} {
		if value(fams, name) <= 0 {
			t.Errorf("%s missing", name)
		}
	}
	checkPoolMetrics(t, f.srv.cfg.Storage, fams)
	// Bounded labels: no job id anywhere.
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				for _, id := range ids {
					if strings.Contains(l.GetValue(), id) {
						t.Fatalf("%s has a job id as label %s", name, l.GetName())
					}
				}
			}
		}
	}
}

// TestMetricsRefuseARebindingHost: with auth off /metrics is open, but
// not to a page whose name was rebound to the server's address.
func TestMetricsRefuseARebindingHost(t *testing.T) {
	f := startFixture(t, nil, 0)
	req, err := http.NewRequest("GET", f.url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "evil.example:8080"
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("/metrics for Host evil.example: %d, want 421", resp.StatusCode)
	}
	if code, _ := scrape(t, f.url, ""); code != 200 {
		t.Fatalf("/metrics by the server's own address: %d, want 200", code)
	}
}

func TestMetricsShowTheQueueDepth(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, metricsWorkspace)
	f := startFixture(t, map[string]string{"ws": ws}, 0) // nobody claims
	f.execute("ws", "ok", nil)
	f.execute("ws", "bad", nil)
	_, fams := scrape(t, f.url, "")
	if got := value(fams, "appliance_steps_ready"); got != 2 {
		t.Fatalf("steps ready = %v, want 2 (the roots of two jobs)", got)
	}
	if got := value(fams, "appliance_jobs_live"); got != 2 {
		t.Fatalf("live jobs = %v, want 2", got)
	}
	if got := value(fams, "appliance_workers_active"); got != 0 {
		t.Fatalf("workers active = %v, want 0", got)
	}
}

func TestMetricsNeedCredentialsWithAuthOn(t *testing.T) {
	f := startFixture(t, nil, 0, withAuth, func(c *config.Server) { c.MetricsToken = "scrape-secret-0123456789" })
	for _, token := range []string{"", "wrong-token", "scrape-secret-012345678"} {
		if code, _ := scrape(t, f.url, token); code != http.StatusUnauthorized {
			t.Fatalf("/metrics with token %q: %d, want 401", token, code)
		}
	}
	if code, fams := scrape(t, f.url, "scrape-secret-0123456789"); code != 200 || value(fams, "appliance_orchestrator_up") != 1 {
		t.Fatalf("/metrics with metrics_token: %d", code)
	}
	if code, _ := scrape(t, f.url, loginToken(t, f.url, "first-password")); code != 200 {
		t.Fatalf("/metrics with a user's token: %d, want 200", code)
	}
	// The probes stay open for load balancers.
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, st := f.probe(path); code != 200 || st.Status != "ok" {
			t.Fatalf("%s with auth on and no token: %d %+v", path, code, st)
		}
	}
}

// poolGauges are the database pool's series, present on PostgreSQL only.
var poolGauges = []string{"appliance_db_connections_in_use", "appliance_db_connections_idle", "appliance_db_connections_max",
	"appliance_db_connection_waits_total", "appliance_db_connection_wait_seconds_total"}

// checkPoolMetrics checks the appliance_db_* series of a scrape taken
// after the server has run jobs: on PostgreSQL the pool's size is
// storage.max_conns and it holds a connection open; bbolt has no pool,
// and none of the series.
func checkPoolMetrics(t *testing.T, st config.Storage, fams map[string]*dto.MetricFamily) {
	t.Helper()
	if !st.Postgres() {
		for _, name := range poolGauges {
			if _, ok := fams[name]; ok {
				t.Errorf("%s on a bbolt server", name)
			}
		}
		return
	}
	for _, name := range poolGauges {
		if value(fams, name) < 0 {
			t.Errorf("%s missing on a PostgreSQL server", name)
		}
	}
	if got, want := value(fams, "appliance_db_connections_max"), float64(st.EffectiveMaxConns()); got != want {
		t.Errorf("appliance_db_connections_max = %v, want storage.max_conns %v", got, want)
	}
	if open := value(fams, "appliance_db_connections_in_use") + value(fams, "appliance_db_connections_idle"); open < 1 || open > float64(st.EffectiveMaxConns()) {
		t.Errorf("%v connections open, want 1 to %d", open, st.EffectiveMaxConns())
	}
}

// A remote worker's claims are timed from their arrival to their answer,
// each claim that handed it steps once.
func TestMetricsTimeRemoteClaims(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, metricsWorkspace)
	f := startFixture(t, map[string]string{"ws": ws}, 0, func(c *config.Server) { c.WorkerToken = workerToken })
	spawnWorker(t, f.url, workerToken, "timed-1", "max_concurrent: 1\n")
	f.waitTerminal(f.execute("ws", "ok", nil))
	_, fams := scrape(t, f.url, "")
	// Two steps in a chain, one slot: a claim for each, or one claim
	// taking the second with the first's result.
	h := fams["appliance_worker_claim_seconds"].GetMetric()[0].GetHistogram()
	if n := h.GetSampleCount(); n < 1 || n > 2 {
		t.Fatalf("appliance_worker_claim_seconds counts %d claims for two steps on one slot; want 1 or 2", n)
	}
	if s := h.GetSampleSum(); s <= 0 || s > 30 {
		t.Fatalf("appliance_worker_claim_seconds sums %v s", s)
	}
}

// quantile estimates the q-quantile of a scraped histogram as Prometheus's
// histogram_quantile does: linearly within the bucket it falls in.
func quantile(h *dto.Histogram, q float64) float64 {
	rank := q * float64(h.GetSampleCount())
	lower, below := 0.0, 0.0
	for _, b := range h.GetBucket() {
		upper, n := b.GetUpperBound(), float64(b.GetCumulativeCount())
		if n >= rank {
			if n == below {
				return upper
			}
			return lower + (upper-lower)*(rank-below)/(n-below)
		}
		lower, below = upper, n
	}
	return lower
}
