package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

// fanWorkspace is a task whose for_each has n instances, each given the
// job's secret pin as a secret input: a big live job with secrets.
func fanWorkspace(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	return `secrets:
  TOKEN: ws-token-value
actions:
  use-key:
    type: script
    tags: [nobody]
    input:
      key: {type: string, secret: true}
      n: {type: integer}
    script: "true"
tasks:
  fan:
    input:
      pin: {type: string, secret: true}
    flow:
      fan:
        action: use-key
        input: {key: "{{ input.pin }}", n: "{{ each.item }}"}
        for_each: [` + strings.Join(items, ", ") + `]
`
}

// startFanJob starts a server without workers (the instances stay ready:
// the job stays live) and a job of fanWorkspace(n), and waits until its
// instances are laid out.
func startFanJob(t testing.TB, n int) (*serverFixture, string) {
	t.Helper()
	dir := t.TempDir()
	writeWorkspace(t, dir, fanWorkspace(n))
	f := startFixture(t, map[string]string{"ws": dir}, 0)
	id := f.execute("ws", "fan", map[string]any{"pin": "pin-12345"})
	waitFor(t, "the for_each instances to be ready", func() int {
		_, steps, err := f.srv.engine.Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		ready := 0
		for _, s := range steps {
			if s.Status == engine.StepReady {
				ready++
			}
		}
		return ready
	}, func(ready int) bool { return ready == n })
	return f, id
}

func pushLine(step string) []engine.LogLine {
	return []engine.LogLine{{TS: time.Now().UTC(), Stream: "stdout", Step: step, Line: "using pin-12345 with ws-token-value"}}
}

// BenchmarkLogPushMasking measures a log push (mask, then append to the
// job's log file) for a live job with a 10,000-instance for_each: as it
// was, reading the job from the store to learn its secrets at every push,
// and as it is, through the engine's in-memory secrets.
func BenchmarkLogPushMasking(b *testing.B) {
	f, id := startFanJob(b, 10000)
	ctx := context.Background()
	eng := f.srv.engine
	b.Run("before-store-read", func(b *testing.B) {
		for range b.N {
			j, steps, err := eng.Job(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			values, err := eng.SecretsOf(j, steps)
			if err != nil {
				b.Fatal(err)
			}
			lines := pushLine("fan[0]")
			lines[0].Line = engine.Mask(lines[0].Line, values)
			if err := f.srv.logs.Append(id, lines); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pushes/s")
	})
	b.Run("after-engine-memory", func(b *testing.B) {
		for range b.N {
			if err := eng.AppendLog(id, pushLine("fan[1]")); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pushes/s")
	})
	if logs := f.logs(id, "fan[1]"); strings.Contains(logs, "pin-12345") || strings.Contains(logs, "ws-token-value") {
		b.Fatalf("a pushed line shows a secret:\n%.300s", logs)
	}
}

// TestLogPushOfABigLiveJobIsMaskedWithoutReadingIt: masking a pushed line
// of a live 10,000-instance job costs about what it does for a small job
// (it no longer reads the job from the store), and still masks the job's
// and its steps' secrets. The bound is loose for a loaded machine: the
// store read it replaces took tens of milliseconds per push.
func TestLogPushOfABigLiveJobIsMaskedWithoutReadingIt(t *testing.T) {
	f, id := startFanJob(t, 10000)
	const pushes = 200
	start := time.Now()
	for range pushes {
		if err := f.srv.engine.AppendLog(id, pushLine("fan[2]")); err != nil {
			t.Fatal(err)
		}
	}
	per := time.Since(start) / pushes
	if logs := f.logs(id, "fan[2]"); !strings.Contains(logs, "using *** with ***") || strings.Contains(logs, "pin-12345") {
		t.Fatalf("pushed lines not masked:\n%.300s", logs)
	}
	// The store read alone, as each push did before.
	start = time.Now()
	if _, _, err := f.srv.engine.Job(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	read := time.Since(start)
	t.Logf("masked push %v; one read of the job %v", per, read)
	if per > 2*time.Millisecond && per > read/4 {
		t.Fatalf("a masked push of a big live job takes %v (one read of the job: %v): it should not read the job", per, read)
	}
}
