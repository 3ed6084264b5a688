package runners

import (
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestReadLinesFlushesOnceItHasPassedOnAllItRead: the flush comes after
// the last line of what one read brought, when the next read may wait for
// the step, and not between lines already read.
func TestReadLinesFlushesOnceItHasPassedOnAllItRead(t *testing.T) {
	pr, pw := io.Pipe()
	var got []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		readLines(pr, Stdout, func(_, line string) { got = append(got, line) }, func() { got = append(got, "<flush>") })
	}()
	for _, chunk := range []string{"a\nb\nc\n", "d\n", "e", "f\ng\n"} {
		if _, err := pw.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	pw.Close()
	<-done
	want := []string{"a", "b", "c", "<flush>", "d", "<flush>", "ef", "g", "<flush>"}
	if !slices.Equal(got, want) {
		t.Fatalf("reader passed on %q, want %q", got, want)
	}
}

// A step's stream reader is not allocated afresh for each step: most
// steps print little, and two buffers of MaxLine each were most of what
// a step cost to read.
func TestReadingAStreamReusesItsBuffer(t *testing.T) {
	readLines(strings.NewReader("warm\n"), Stdout, func(string, string) {}, nil)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 100
	for range n {
		readLines(strings.NewReader("one line\n"), Stdout, func(string, string) {}, nil)
	}
	runtime.ReadMemStats(&after)
	// Under the race detector a pool drops a quarter of what it is given:
	// a quarter of the reads then allocate a buffer.
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > MaxLine/2 {
		t.Fatalf("reading a one-line stream allocates %d bytes, want far less than its %d-byte buffer", per, MaxLine)
	}
}
