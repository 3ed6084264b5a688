package e2e

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app"
)

// BenchmarkEventSourceEventsPerSecond measures events/s from one consumer
// into a target task of one `true` step, through the in-process workers
// (one per CPU): from the server's start until the b.N target jobs are all
// done and only the consumer's own record is left. max_in_flight is 0
// (unlimited) or 8.
func BenchmarkEventSourceEventsPerSecond(b *testing.B) {
	for _, inFlight := range []int{0, 8} {
		b.Run(fmt.Sprintf("max_in_flight=%d", inFlight), func(b *testing.B) {
			app.TuneRuntime()
			dir := filepath.Join(b.TempDir(), "ws")
			writeWorkspace(b, dir, eventsWorkspace(b.N, inFlight, "never"))
			b.ResetTimer()
			start := time.Now()
			f := startFixture(b, map[string]string{"ws": dir}, runtime.NumCPU())
			q := url.Values{"workspace": {"ws"}, "task_name": {"handle"}, "limit": {"1"}}
			deadline := time.Now().Add(10 * time.Minute)
			for {
				var page struct {
					Total int `json:"total"`
				}
				do(b, "GET", f.url+"/api/jobs?"+q.Encode(), nil, &page)
				st, err := f.srv.engine.Stats(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if page.Total == b.N && st.LiveJobs == 0 {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d target jobs, %d live after 10 minutes", page.Total, b.N, st.LiveJobs)
				}
				time.Sleep(2 * time.Millisecond)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
		})
	}
}
