package local

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api/workerproto"
	"github.com/appliance-sh/appliance/runners"
)

// lines collects a step's output lines for assertions.
type lines struct {
	mu  sync.Mutex
	all []workerproto.LogLine
}

func (l *lines) log(stream, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, workerproto.LogLine{Stream: stream, Line: line})
}

func (l *lines) stream(name string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, x := range l.all {
		if x.Stream == name {
			out = append(out, x.Line)
		}
	}
	return out
}

func (l *lines) has(stream, line string) bool {
	for _, x := range l.stream(stream) {
		if x == line {
			return true
		}
	}
	return false
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func errText(r runners.Result) string {
	if r.Error == nil {
		return ""
	}
	return *r.Error
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// requireNode skips a test that runs node when it is not installed, except
// under APPLIANCE_REQUIRE_NODE=1 (CI installs it), where that is a failure.
func requireNode(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("APPLIANCE_REQUIRE_NODE") == "1" {
			t.Fatalf("node is required (APPLIANCE_REQUIRE_NODE=1) but not found: %v", err)
		}
		t.Skip("node is not installed (set APPLIANCE_REQUIRE_NODE=1 to require it)")
	}
}
