package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestQueuesSection(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"limits", "queues:\n  deploys: {limit: 2}\n  builds: {}\n", ""},
		{"limit over the maximum", "queues:\n  deploys: {limit: 10001}\n", "queues.deploys.limit: must be between 1 and 10000, got 10001"},
		{"negative limit", "queues:\n  deploys: {limit: -1}\n", "queues.deploys.limit: must be between 1 and 10000, got -1"},
		{"bad name", "queues:\n  'a b': {limit: 1}\n", "queues.a b: a queue name is"},
		{"unknown key", "queues:\n  deploys: {max: 1}\n", "2:13"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "server-config.yaml")
			if err := os.WriteFile(p, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadServer(p)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err = %v, want %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.QueueLimits(); got["deploys"] != 2 || got["builds"] != 1 || len(got) != 2 {
				t.Fatalf("queue limits = %v, want deploys 2 and builds 1 (the default)", got)
			}
			if got, want := DescribeQueues(cfg.Queues), "builds (limit 1), deploys (limit 2)"; got != want {
				t.Fatalf("start-up summary %q, want %q", got, want)
			}
		})
	}
}
