package worker

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestResultsDueAtOnceShareARequestAndAreAnsweredOneByOne: while one
// report is on its way, the results that come wait and go together in the
// next request, and each gets its own answer.
func TestResultsDueAtOnceShareARequestAndAreAnsweredOneByOne(t *testing.T) {
	hold := make(chan struct{})
	var once sync.Once
	srv := newWireServer(t, func(w http.ResponseWriter, r *request) {
		results := r.Body["results"].([]any)
		once.Do(func() { <-hold }) // the first request waits for the others to queue
		var answers []string
		for _, res := range results {
			status := 200
			if res.(map[string]any)["step_name"] == "late" {
				status = 409
			}
			answers = append(answers, fmt.Sprintf(`{"status": %d, "error": "step is not running"}`, status))
		}
		writeJSON(w, 200, fmt.Sprintf(`{"results": [%s]}`, strings.Join(answers, ", ")))
	})
	c := NewClient(srv.URL, "t", nil)
	ctx := testContext(t)
	errs := make(chan error, 1)
	go func() { errs <- c.Complete(ctx, "w", "j", "first", Result{}) }()
	eventually(t, 10*time.Second, "the first report on its way", func() bool { return len(srv.requests()) == 1 })

	steps := []string{"a", "late", "b"}
	got := make([]error, len(steps))
	var wg sync.WaitGroup
	for i, s := range steps {
		wg.Go(func() { got[i] = c.Complete(ctx, "w", "j", s, Result{}) })
	}
	eventually(t, 10*time.Second, "the three reports queued", func() bool {
		c.reports.mu.Lock()
		defer c.reports.mu.Unlock()
		return len(c.reports.queue) == 3
	})
	close(hold)
	wg.Wait()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if len(reqs) != 2 || len(reqs[1].Body["results"].([]any)) != 3 {
		t.Fatalf("requests %+v; want the first alone, then the three together", reqs)
	}
	if got[0] != nil || got[2] != nil || !errors.Is(got[1], ErrConflict) {
		t.Fatalf("answers %v; want ok, a conflict, ok", got)
	}
}

// TestResultsGoOneByOneToAServerWithoutReports: a server older than the
// worker has no /worker/reports; each result goes to its own complete.
func TestResultsGoOneByOneToAServerWithoutReports(t *testing.T) {
	srv := newWireServer(t, func(w http.ResponseWriter, r *request) {
		if r.Path == "/worker/reports" {
			writeJSON(w, 404, `{"error": "Not Found"}`)
			return
		}
		writeJSON(w, 200, `{"status": "ok"}`)
	})
	c := NewClient(srv.URL, "t", nil)
	if err := c.Complete(testContext(t), "w", "j", "s", Result{ExitCode: 3}); err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if len(reqs) != 2 || reqs[1].Path != "/worker/jobs/j/steps/s/complete" || reqs[1].Body["exit_code"] != 3.0 || reqs[1].Body["worker_id"] != "w" {
		t.Fatalf("requests %+v; want the batch, then the step's own complete", reqs)
	}
}
