package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/appliance-sh/appliance/api/client"
)

// A 503 with Retry-After (a failover) is sent again, with the same
// Idempotency-Key on an execute; a 503 without it, or a 500, is not.
func TestRetriesExactly503WithRetryAfter(t *testing.T) {
	var (
		mu   sync.Mutex
		keys []string
		busy = 2
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/api/workspaces/w/tasks/t/execute":
			keys = append(keys, r.Header.Get("Idempotency-Key"))
			if busy > 0 {
				busy--
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"error":"no replica leads at the moment"}`))
				return
			}
			_, _ = w.Write([]byte(`{"job_id":"j1"}`))
		case "/api/jobs/plain503":
			keys = append(keys, "plain503")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"down"}`))
		case "/api/jobs/fail":
			keys = append(keys, "fail")
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":"broken"}`))
		}
	}))
	defer srv.Close()
	c := client.New(srv.URL)
	created, _, err := c.Execute(context.Background(), "w", "t", nil)
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	if created.JobID != "j1" {
		t.Fatalf("job %q", created.JobID)
	}
	if len(keys) != 3 || keys[0] == "" || keys[0] != keys[1] || keys[1] != keys[2] {
		t.Fatalf("attempts' Idempotency-Keys %q: want 3 attempts with one key", keys)
	}
	for _, path := range []string{"plain503", "fail"} {
		keys = nil
		_, err := c.Get(context.Background(), "/api/jobs/"+path, nil)
		var ae *client.Error
		if !errors.As(err, &ae) || len(keys) != 1 {
			t.Fatalf("%s: %v after %d attempts, want an *Error after 1", path, err, len(keys))
		}
	}
	// Another execute gets another key.
	keys, busy = nil, 0
	if _, _, err := c.Execute(context.Background(), "w", "t", nil); err != nil {
		t.Fatal(err)
	}
	first := keys[0]
	if _, _, err := c.Execute(context.Background(), "w", "t", nil); err != nil {
		t.Fatal(err)
	}
	if keys[1] == first {
		t.Fatal("two executes shared an Idempotency-Key")
	}
}
