package runners

import (
	"io"
	"slices"
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
