package store

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine"
)

func TestReadLogNeverShowsALineBeingWritten(t *testing.T) {
	l := openLogs(t)
	appendLines(t, l, "j1", line("a", "one"), line("a", "two"))
	f, err := os.OpenFile(l.jsonlPath("j1"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"ts":"2025-03-01T12:00:00Z","stream":"stdout","step":"a","li`) // half an append
	f.Close()
	for _, q := range []engine.LogQuery{{}, {Tail: 1}, {Tail: 5, Step: "a"}, {After: 1}} {
		var got strings.Builder
		page, err := l.ReadLog(context.Background(), "j1", q, &got)
		if err != nil || strings.Contains(got.String(), `"li`+"`") || !strings.HasSuffix(got.String(), "\"two\"}\n") || page.Next != 2 {
			t.Fatalf("ReadLog(%+v) = %q, %+v, %v; want whole lines up to two", q, got.String(), page, err)
		}
	}
}
