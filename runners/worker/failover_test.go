package worker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// With several server URLs, a call that finds its server unreachable or
// answering 503 (a follower during a failover) makes the next call go to
// the next one; a server that answers stays in use.
func TestClientTriesTheServerURLsInTurn(t *testing.T) {
	var follower, leader atomic.Int32
	f := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		follower.Add(1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"no replica leads at the moment"}`))
	}))
	defer f.Close()
	l := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leader.Add(1)
		_, _ = w.Write([]byte(`{}`))
	}))
	defer l.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close() // nothing listens there any more

	c := NewClient(deadURL, "tok", nil, WithServerURLs(f.URL, l.URL))
	ctx := context.Background()
	if err := c.Heartbeat(ctx, "w", nil); err == nil {
		t.Fatal("heartbeat to an unreachable server succeeded")
	}
	if err := c.Heartbeat(ctx, "w", nil); err == nil {
		t.Fatal("heartbeat answered 503 succeeded")
	}
	for range 3 {
		if err := c.Heartbeat(ctx, "w", nil); err != nil {
			t.Fatalf("heartbeat to the leader: %v", err)
		}
	}
	if follower.Load() != 1 || leader.Load() != 3 {
		t.Fatalf("calls: follower %d, leader %d; want 1 and 3", follower.Load(), leader.Load())
	}
	if _, err := NewClient(l.URL, "tok", nil, WithServerURLs("ftp://x")).Claim(ctx, "w", nil); err == nil {
		t.Fatal("a malformed server url was accepted")
	}
}
