// Package runnertest holds what the runners' tests share: a log that
// collects a step's lines, a poll with a deadline, a test's context.
// A test helper: it must not import engine, store, app or the server's api
// packages but the worker protocol's wire types.
package runnertest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api/workerproto"
)

// Lines collects a step's output lines for assertions; Log is a step's
// log callback.
type Lines struct {
	mu  sync.Mutex
	all []workerproto.LogLine
}

// Log records one line of stream.
func (l *Lines) Log(stream, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, workerproto.LogLine{Stream: stream, Line: line})
}

// All is every line, in order, for a failure's message.
func (l *Lines) All() []workerproto.LogLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]workerproto.LogLine(nil), l.all...)
}

// Stream is the lines of one stream, in order.
func (l *Lines) Stream(name string) []string {
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

// Has reports whether stream holds line.
func (l *Lines) Has(stream, line string) bool {
	for _, x := range l.Stream(stream) {
		if x == line {
			return true
		}
	}
	return false
}

// Eventually polls cond until it holds or the deadline passes.
func Eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Context is a context the test's end cancels, with a minute's bound.
func Context(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ErrText is a result's error, or "" without one.
func ErrText(r workerproto.Result) string {
	if r.Error == nil {
		return ""
	}
	return *r.Error
}

// WriteFile writes content to path or fails the test.
func WriteFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
