package local

import (
	"context"
	"testing"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
)

// BenchmarkLocalTrue is the local runner's own cost per step: a shell
// script `true`, with its input, run to completion.
func BenchmarkLocalTrue(b *testing.B) {
	l := New(Config{})
	dir := b.TempDir()
	step := &runners.Step{JobID: "j", Name: "s", Workspace: "w", Dir: dir,
		Action: &workflow.Action{Type: "script", Script: "true", Language: "shell"},
		Input:  map[string]any{"name": "x"}, Log: func(string, string) {}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if code, err := l.Run(context.Background(), step); code != 0 || err != nil {
			b.Fatal(code, err)
		}
	}
}

func BenchmarkLocalTrueParallel(b *testing.B) {
	l := New(Config{})
	dir := b.TempDir()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		step := &runners.Step{JobID: "j", Name: "s", Workspace: "w", Dir: dir,
			Action: &workflow.Action{Type: "script", Script: "true", Language: "shell"},
			Input:  map[string]any{"name": "x"}, Log: func(string, string) {}}
		for pb.Next() {
			if code, err := l.Run(context.Background(), step); code != 0 || err != nil {
				b.Error(code, err)
			}
		}
	})
}
