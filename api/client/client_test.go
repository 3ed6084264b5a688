package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestErrorCarriesTheAPIsMessageAndStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"error": "job has already ended"}`)
	}))
	defer srv.Close()
	_, _, err := New(srv.URL).Cancel(context.Background(), "x")
	var ae *Error
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Error() != "job has already ended" {
		t.Fatalf("err = %#v, want *Error 409 with the server's message", err)
	}
}

// creds hands out a stale token, then a fresh one on Refresh.
type creds struct{ refreshed int }

func (c *creds) Token(context.Context) string { return "stale" }
func (c *creds) Refresh(_ context.Context, stale string) (string, error) {
	if stale != "stale" {
		return "", errors.New("unexpected stale token")
	}
	c.refreshed++
	return "fresh", nil
}

func TestA401RenewsTheTokenOnceAndTheHintSaysWhatToDo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer fresh" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error": "invalid token"}`)
			return
		}
		fmt.Fprint(w, `{"job_id": "j", "status": "running", "steps": [{"step_name": "s", "status": "running"}]}`)
	}))
	defer srv.Close()
	cr := &creds{}
	job, raw, err := New(srv.URL, WithCredentials(cr)).Job(context.Background(), "j")
	if err != nil || job.JobID != "j" || len(job.Steps) != 1 || job.Steps[0].StepName != "s" || len(raw) == 0 || cr.refreshed != 1 {
		t.Fatalf("job %+v, raw %q, err %v, refreshed %d", job, raw, err, cr.refreshed)
	}

	_, _, err = New(srv.URL, WithToken("bad"), WithLoginHint("log in again")).Job(context.Background(), "j")
	if err == nil || err.Error() != "invalid token (log in again)" {
		t.Fatalf("err = %v, want the message and the hint", err)
	}
}
