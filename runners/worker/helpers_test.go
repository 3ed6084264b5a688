package worker

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"
)

// lines collects a step's output lines for assertions.
type lines struct {
	mu  sync.Mutex
	all []LogLine
}

func (l *lines) log(stream, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, LogLine{Stream: stream, Line: line})
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

func errText(r Result) string {
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
