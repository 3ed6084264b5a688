package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// pageJobs follows next_cursor from the first page of query, returning the
// ids in order; between pages it calls between (new jobs arrive).
func pageJobs(t *testing.T, f *fixture, query string, between func()) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for range 100 {
		q := query
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		m := f.api("GET", "/api/jobs?"+q, nil).expect(200).object()
		for _, it := range m["items"].([]any) {
			ids = append(ids, it.(map[string]any)["job_id"].(string))
		}
		if between != nil {
			between()
		}
		next, _ := m["next_cursor"].(string)
		if next == "" {
			if m["next_cursor"] != nil {
				t.Fatalf("next_cursor = %v, want a string or null", m["next_cursor"])
			}
			return ids
		}
		cursor = next
	}
	t.Fatal("pages never ended")
	return nil
}

// TestJobListCursorAndStatusFilter pages the list by cursor while new jobs
// arrive (none repeated or skipped, newest first, next_cursor null on the
// last page), filters by status and source type, and refuses bad values.
func TestJobListCursorAndStatusFilter(t *testing.T) {
	f := newFixture(t)
	var ids []string
	for i := range 7 {
		ids = append(ids, f.execute(fmt.Sprint("n", i)))
	}
	for _, id := range []string{ids[1], ids[4]} {
		f.api("POST", "/api/jobs/"+id+"/cancel", nil).expect(200)
	}
	newest := slices.Clone(ids)
	slices.Reverse(newest)

	arrived := 0
	got := pageJobs(t, f, "limit=3", func() { f.execute(fmt.Sprint("late", arrived)); arrived++ })
	if !slices.Equal(got, newest) {
		t.Errorf("cursor pages = %v, want %v", got, newest)
	}
	if got := pageJobs(t, f, "limit=7", nil); len(got) != 7+arrived {
		t.Errorf("a page exactly as long as the rest: %d ids, want %d", len(got), 7+arrived)
	}

	cancelled := f.api("GET", "/api/jobs?status=cancelled", nil).expect(200).object()
	if cancelled["total"] != 2.0 || cancelled["next_cursor"] != nil {
		t.Errorf("status=cancelled = %v, want 2 jobs and no next page", cancelled)
	}
	if got := pageJobs(t, f, "status=cancelled,failed&limit=1", nil); !slices.Equal(got, []string{ids[4], ids[1]}) {
		t.Errorf("cancelled or failed = %v, want %v", got, []string{ids[4], ids[1]})
	}
	mixed := f.api("GET", "/api/jobs?status=pending,running&source_type=api&workspace=main&task_name=hello", nil).expect(200).object()
	if mixed["total"] != float64(5+arrived) {
		t.Errorf("live api jobs of hello: total %v, want %d", mixed["total"], 5+arrived)
	}
	if webhook := f.api("GET", "/api/jobs?source_type=webhook", nil).expect(200).object(); webhook["total"] != 0.0 {
		t.Errorf("source_type=webhook total = %v, want 0", webhook["total"])
	}
	if off := f.api("GET", "/api/jobs?status=cancelled&offset=1", nil).expect(200).object()["items"].([]any); len(off) != 1 || off[0].(map[string]any)["job_id"] != ids[1] {
		t.Errorf("offset still works with a filter: %v", off)
	}
	f.api("GET", "/api/jobs?status=done", nil).expectError(400, `unknown status "done"`)
	f.api("GET", "/api/jobs?source_type=mail", nil).expectError(400, `unknown source_type "mail"`)
	f.api("GET", "/api/jobs?cursor=%21%21", nil).expectError(400, "malformed cursor")
}

const fanWorkflow = `
actions:
  ok: {type: script, script: "true"}
tasks:
  fan:
    input:
      n: {type: integer, required: true}
    flow:
      fan:
        action: ok
        for_each: "{{ range(input.n) | list }}"
      after: {action: ok, depends_on: [fan]}
`

// TestBigJobDetailSummarizesAndStepsPage runs a for_each of 1,200
// instances (over the detail's cap of 1,000 records): the detail lists the
// flow steps only, counts the instances it omits and every status in
// steps_summary, and /steps pages all of them by cursor and status.
func TestBigJobDetailSummarizesAndStepsPage(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "big")
	writeFile(t, filepath.Join(dir, ".workflows", "main.yaml"), fanWorkflow, 0o644)
	f := startAPI(t, tmp, map[string]string{"big": dir})
	const n = 1200
	id := f.api("POST", "/api/workspaces/big/tasks/fan/execute", map[string]any{"input": map[string]any{"n": n}}).expect(200).object()["job_id"].(string)
	var d map[string]any
	eventually(t, "every instance to be ready", func() bool {
		d = f.api("GET", "/api/jobs/"+id, nil).expect(200).object()
		s, _ := d["steps_summary"].(map[string]any)
		return s["ready"] == float64(n)
	})
	if s := d["steps_summary"].(map[string]any); s["running"] != 1.0 || s["pending"] != 1.0 || len(s) != 3 {
		t.Errorf("steps_summary = %v, want %d ready, fan running, after pending", s, n)
	}
	var names []string
	for _, st := range d["steps"].([]any) {
		names = append(names, st.(map[string]any)["step_name"].(string))
	}
	if !slices.Equal(names, []string{"fan", "after"}) || d["steps_omitted"] != float64(n) {
		t.Errorf("detail steps = %v, omitted %v; want [fan after], %d", names, d["steps_omitted"], n)
	}

	w := f.register("w")
	f.runStep(w, id, "fan[0]", map[string]any{"i": 0})
	f.endStep(w, id, "fan[1]", nil, 1, "boom")

	// Every step once, in the job's order, by pages of 500.
	var all []string
	cursor := ""
	for range 10 {
		q := "/api/jobs/" + id + "/steps?limit=500"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		m := f.api("GET", q, nil).expect(200).object()
		if m["total"] != float64(n+2) {
			t.Fatalf("steps total = %v, want %d", m["total"], n+2)
		}
		for _, st := range m["items"].([]any) {
			all = append(all, st.(map[string]any)["step_name"].(string))
		}
		if m["next_cursor"] == nil {
			break
		}
		cursor = m["next_cursor"].(string)
	}
	want := []string{"fan"}
	for i := range n {
		want = append(want, fmt.Sprintf("fan[%d]", i))
	}
	want = append(want, "after")
	if !slices.Equal(all, want) {
		t.Errorf("paged %d steps, want %d in order (first %v)", len(all), len(want), all[:min(5, len(all))])
	}
	done := f.api("GET", "/api/jobs/"+id+"/steps?status=completed,failed", nil).expect(200).object()
	var ended []string
	for _, st := range done["items"].([]any) {
		ended = append(ended, st.(map[string]any)["step_name"].(string)+"="+st.(map[string]any)["status"].(string))
	}
	if !slices.Equal(ended, []string{"fan[0]=completed", "fan[1]=failed"}) || done["total"] != 2.0 {
		t.Errorf("completed or failed steps = %v (total %v)", ended, done["total"])
	}
	f.api("GET", "/api/jobs/"+id+"/steps?status=bogus", nil).expectError(400, `unknown status "bogus"`)
	f.api("GET", "/api/jobs/"+id+"/steps?cursor=x", nil).expectError(400, "malformed cursor")
	f.api("GET", "/api/jobs/no-such-job/steps", nil).expectError(404, "")
}

// BenchmarkLogPushes pushes log lines for one instance of a running job
// of 1 and of 10,000 instances, as a worker does: a push must not cost in
// proportion to the job's size.
func BenchmarkLogPushes(b *testing.B) {
	for _, n := range []int{1, 10000} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) { benchLogPushes(b, n) })
	}
}

func benchLogPushes(b *testing.B, n int) {
	tmp := b.TempDir()
	dir := filepath.Join(tmp, "big")
	writeFile(b, filepath.Join(dir, ".workflows", "main.yaml"), fanWorkflow, 0o644)
	f := startAPI(b, tmp, map[string]string{"big": dir})
	id := f.api("POST", "/api/workspaces/big/tasks/fan/execute", map[string]any{"input": map[string]any{"n": n}}).expect(200).object()["job_id"].(string)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d := f.api("GET", "/api/jobs/"+id, nil).expect(200).object()
		if d["steps_summary"].(map[string]any)["ready"] == float64(n) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("instances never became ready")
		}
	}
	w := f.register("w")
	f.claimStep(w, id, "fan[0]")
	f.worker("POST", "/worker/jobs/"+id+"/steps/fan[0]/start", map[string]any{"worker_id": w}).expect(200)
	body, _ := json.Marshal(logPush(w, "fan[0]", "a line of output", "another line"))
	client := &http.Client{}
	b.ResetTimer()
	for b.Loop() {
		req, _ := http.NewRequest("POST", f.url+"/worker/jobs/"+id+"/logs", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+workerToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("push: %d", resp.StatusCode)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pushes/s")
}

// BenchmarkJobDetailRequest10k is GET /api/jobs/{id} of a live job of
// 10,000 instances, end to end: the store read of every step record, the
// summary and the streamed answer.
func BenchmarkJobDetailRequest10k(b *testing.B) {
	tmp := b.TempDir()
	dir := filepath.Join(tmp, "big")
	writeFile(b, filepath.Join(dir, ".workflows", "main.yaml"), fanWorkflow, 0o644)
	f := startAPI(b, tmp, map[string]string{"big": dir})
	id := f.api("POST", "/api/workspaces/big/tasks/fan/execute", map[string]any{"input": map[string]any{"n": 10000}}).expect(200).object()["job_id"].(string)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d := f.api("GET", "/api/jobs/"+id, nil).expect(200).object()
		if d["steps_summary"].(map[string]any)["ready"] == 10000.0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("instances never became ready")
		}
	}
	for _, path := range []string{"/api/jobs/" + id, "/api/jobs/" + id + "/steps?limit=200&cursor=5000"} {
		b.Run(strings.TrimPrefix(strings.SplitN(path, "?", 2)[0], "/api/jobs/"+id), func(b *testing.B) {
			for b.Loop() {
				resp, err := http.Get(f.url + path)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("GET %s: %d", path, resp.StatusCode)
				}
			}
		})
	}
}
