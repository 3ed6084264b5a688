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
		writeJSON(w, 200, `{"results": [`+answersTo(results)+`]}`)
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

// TestAClaimCarriesTheQueuedResults: results waiting while a report is on
// its way go with the next claim instead, answered from the claim's
// answer; a claim that brought no step after carrying results waits for
// work as a plain claim does. A server that refuses a claim carrying
// results (400) gets them on their own, then and from then on.
func TestAClaimCarriesTheQueuedResults(t *testing.T) {
	hold := make(chan struct{})
	var once sync.Once
	refuse := false
	var mu sync.Mutex
	srv := newWireServer(t, func(w http.ResponseWriter, r *request) {
		switch r.Path {
		case "/worker/reports":
			once.Do(func() { <-hold })
			n := len(r.Body["results"].([]any))
			writeJSON(w, 200, `{"results": [`+strings.TrimSuffix(strings.Repeat(`{"status": 200},`, n), ",")+`]}`)
		case "/worker/claims":
			results, _ := r.Body["results"].([]any)
			mu.Lock()
			defer mu.Unlock()
			if refuse && len(results) > 0 {
				writeJSON(w, 400, `{"error": "unknown field \"results\""}`)
				return
			}
			if len(results) > 0 {
				writeJSON(w, 200, `{"assignments": [], "results": [`+answersTo(results)+`]}`)
				return
			}
			writeJSON(w, 200, `{"assignments": [{"job_id": "j2", "step_name": "next"}]}`)
		}
	})
	c := NewClient(srv.URL, "t", nil)
	ctx := testContext(t)
	first := make(chan error, 1)
	go func() { first <- c.Complete(ctx, "w", "j", "first", Result{}) }()
	eventually(t, 10*time.Second, "the first report on its way", func() bool { return len(srv.requests()) == 1 })
	got := make([]error, 2)
	var wg sync.WaitGroup
	for i, s := range []string{"a", "late"} {
		wg.Go(func() { got[i] = c.Complete(ctx, "w", "j", s, Result{}) })
	}
	eventually(t, 10*time.Second, "two reports queued", func() bool {
		c.reports.mu.Lock()
		defer c.reports.mu.Unlock()
		return len(c.reports.queue) == 2
	})
	as, err := c.ClaimSteps(ctx, "w", 4)
	if err != nil || len(as) != 1 || as[0].StepName != "next" {
		t.Fatalf("claim = %+v, %v; want the step the plain claim after it brought", as, err)
	}
	wg.Wait()
	if got[0] != nil || !errors.Is(got[1], ErrConflict) {
		t.Fatalf("answers %v; want ok, then a conflict, from the claim's answer", got)
	}
	reqs := srv.requests()
	if len(reqs) != 3 || reqs[1].Path != "/worker/claims" || len(reqs[1].Body["results"].([]any)) != 2 || reqs[2].Body["results"] != nil {
		t.Fatalf("requests %+v; want the report, a claim carrying the two results, a plain claim", reqs)
	}
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}

	// A server that refuses them: the results go on their own.
	mu.Lock()
	refuse = true
	mu.Unlock()
	done := make(chan error, 1)
	h := newResultHold()
	go func() { done <- c.completeHeld(ctx, "w", "j", "refused", Result{}, h) }()
	<-h.queued // held for the claim
	if _, err := c.ClaimSteps(ctx, "w", 4); err == nil {
		t.Fatal("the refused claim carrying results answered no error")
	}
	if err := <-done; err != nil {
		t.Fatalf("the result after the refused claim: %v, want it taken through /worker/reports", err)
	}
	if !c.claimsCarryNoResults.Load() {
		t.Fatal("the client still has claims carry results")
	}
	if last := srv.requests()[len(srv.requests())-1]; last.Path != "/worker/reports" {
		t.Fatalf("last request %s, want the result on its own", last.Path)
	}
}

// TestAHeldResultWaitsOnlyForItsClaim: a result held for a claim is not
// sent on its own, until it is released or the worker pauses between
// claims (when a slot claims on its own: polling); one reported after its
// release is not held at all.
func TestAHeldResultWaitsOnlyForItsClaim(t *testing.T) {
	srv := newWireServer(t, func(w http.ResponseWriter, r *request) {
		writeJSON(w, 200, `{"results": [`+okAnswers(len(r.Body["results"].([]any)))+`]}`)
	})
	c := NewClient(srv.URL, "t", nil)
	ctx := testContext(t)
	held := func(step string, h *resultHold) <-chan error {
		errs := make(chan error, 1)
		go func() { errs <- c.completeHeld(ctx, "w", "j", step, Result{}, h) }()
		<-h.queued
		return errs
	}
	answered := func(errs <-chan error) {
		t.Helper()
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the result was not sent")
		}
	}
	unsent := func() {
		t.Helper()
		c.reports.mu.Lock()
		defer c.reports.mu.Unlock()
		if c.reports.busy || len(srv.requests()) > 0 {
			t.Fatalf("a held result went on its own: %+v", srv.requests())
		}
	}

	h := newResultHold()
	errs := held("released", h)
	unsent()
	c.releaseHeld(h)
	answered(errs)

	errs = held("paused", newResultHold())
	if c.polling() {
		t.Fatal("polling before the pause")
	}
	resume := c.holdNone()
	answered(errs)
	if !c.polling() {
		t.Fatal("not polling during the pause: a slot would hold its result for the pump")
	}
	resume()

	h = newResultHold()
	c.releaseHeld(h)
	answered(held("after its release", h))
	if n := len(srv.requests()); n != 3 {
		t.Fatalf("%d requests, want each result on its own", n)
	}
}

// answersTo answers a request's results one by one, as the server does:
// 200 each, but 409 for a step named "late" (no longer running).
func answersTo(results []any) string {
	var answers []string
	for _, res := range results {
		status := 200
		if res.(map[string]any)["step_name"] == "late" {
			status = 409
		}
		answers = append(answers, fmt.Sprintf(`{"status": %d, "error": "step is not running"}`, status))
	}
	return strings.Join(answers, ", ")
}
