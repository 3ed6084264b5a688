package metrics_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/app/metrics"
	"github.com/appliance-sh/appliance/engine"
)

// appliance_leader follows the replica's leadership; each start or end of
// leading counts once in appliance_leadership_changes_total.
func TestLeadershipSeries(t *testing.T) {
	reg := metrics.New(func(context.Context) (engine.Stats, error) { return engine.Stats{}, nil })
	l := reg.WatchLeadership()
	srv := httptest.NewServer(reg.Handler())
	defer srv.Close()
	scrape := func() string {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for _, step := range []struct {
		leads         bool
		leader, count string
	}{
		{false, "appliance_leader 0", "appliance_leadership_changes_total 0"},
		{true, "appliance_leader 1", "appliance_leadership_changes_total 1"},
		{true, "appliance_leader 1", "appliance_leadership_changes_total 1"},
		{false, "appliance_leader 0", "appliance_leadership_changes_total 2"},
	} {
		l.Set(step.leads)
		got := scrape()
		if !strings.Contains(got, step.leader+"\n") || !strings.Contains(got, step.count+"\n") {
			t.Fatalf("after Set(%v): want %q and %q in\n%s", step.leads, step.leader, step.count, got)
		}
	}
}
