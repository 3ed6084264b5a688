package e2e

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// renderBombWorkspace has two bombs (one runs for hours, one builds a
// 100 MB string) and a light task that renders templates too.
const renderBombWorkspace = `
tasks:
  slow_bomb:
    flow:
      a:
        type: script
        script: "true"
        when: "{% for i in range(100000) %}{% for j in range(100000) %}{% for k in range(100000) %}{% endfor %}{% endfor %}{% endfor %}true"
  big_bomb:
    flow:
      a:
        type: script
        script: "true"
        input: {x: "{{ 'a' * 100000000 }}"}
  light:
    input:
      n: {type: integer}
    flow:
      a:
        type: script
        script: "echo {{ input.n }}"
        input: {n: "{{ input.n }}"}
`

// TestRenderBombsDoNotStallOtherJobs starts three render bombs and, at the
// same time, 100 light jobs: the bombs fail naming their limit, and the
// light jobs run as if the bombs were not there. Were templates rendered
// on the orchestrator loop, every light job created during the slow
// bomb's 2 s would wait for it.
func TestRenderBombsDoNotStallOtherJobs(t *testing.T) {
	dir := t.TempDir()
	writeWorkspace(t, dir, renderBombWorkspace)
	f := startFixture(t, map[string]string{"ws": dir}, 8)

	// Everything starts at once; one client sends a second slow bomb
	// halfway through its light jobs, so that light jobs are being created
	// while a bomb renders whatever the order the requests arrive in.
	start := time.Now()
	bombs := make([]string, 3)
	const lights, clients = 100, 10
	ids := make([]string, lights)
	var wg sync.WaitGroup
	wg.Go(func() { bombs[0] = f.execute("ws", "slow_bomb", nil) })
	wg.Go(func() { bombs[1] = f.execute("ws", "big_bomb", nil) })
	for c := range clients {
		wg.Go(func() {
			for i := c; i < lights; i += clients {
				if c == 0 && i == lights/2 {
					bombs[2] = f.execute("ws", "slow_bomb", nil)
				}
				ids[i] = f.execute("ws", "light", map[string]any{"n": i})
			}
		})
	}
	wg.Wait()

	var latencies []time.Duration
	for i, id := range ids {
		j := f.waitTerminal(id)
		if j.Status != "completed" {
			var msg string
			if m := j.step("a").ErrorMessage; m != nil {
				msg = *m
			}
			t.Fatalf("light job %d is %s: %+v, error %q", i, j.Status, j.step("a"), msg)
		}
		if got := fmt.Sprint(j.step("a").Input["n"]); got != fmt.Sprint(i) {
			t.Fatalf("light job %d rendered n=%s", i, got)
		}
		latencies = append(latencies, j.CompletedAt.Sub(j.CreatedAt))
	}
	sort.Slice(latencies, func(a, b int) bool { return latencies[a] < latencies[b] })
	p50, p99 := latencies[len(latencies)/2], latencies[len(latencies)*99/100]
	t.Logf("%d light jobs beside three render bombs: created->completed p50 %v, p99 %v, max %v",
		lights, p50, p99, latencies[len(latencies)-1])

	for _, bomb := range []struct{ id, limit string }{
		{bombs[0], "template exceeded limits.template_time (2s)"},
		{bombs[1], "template exceeded limits.template_output (1MB)"},
		{bombs[2], "template exceeded limits.template_time (2s)"},
	} {
		j := f.waitTerminal(bomb.id)
		msg := j.step("a").ErrorMessage
		if j.Status != "failed" || msg == nil || !strings.Contains(*msg, bomb.limit) {
			t.Errorf("bomb job %s: %s, error %v; want failed naming %q", bomb.id, j.Status, msg, bomb.limit)
		}
	}
	if took := time.Since(start); took > 2*time.Second+15*time.Second {
		t.Errorf("the bombs took %v to fail", took)
	}
	if raceDetector {
		t.Logf("not checking the p99 under the race detector")
		return
	}
	if p99 >= time.Second {
		t.Fatalf("p99 created->completed of the light jobs is %v, want under 1s: a bomb held them up", p99)
	}
}
