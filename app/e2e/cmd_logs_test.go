package e2e

import (
	"strings"
	"testing"
)

func TestLogsTailPrintsOnlyTheLastLines(t *testing.T) {
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 2)
	id := runHello(t, f)
	_, full, _ := f.client("logs", id)
	all := strings.Split(strings.TrimSuffix(full, "\n"), "\n")
	_, stepFull, _ := f.client("logs", id, "--step", "say-hello")
	say := strings.Split(strings.TrimSuffix(stepFull, "\n"), "\n")
	if len(all) < 3 || len(say) < 2 {
		t.Fatalf("hello-world log too short to tail:\n%s", full)
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--tail", "2"}, all[len(all)-2:]},
		{[]string{"--tail", "1000"}, all},
		{[]string{"--tail", "1", "--step", "say-hello"}, say[len(say)-1:]},
		// A finished job's stream ends at once: it starts at the last line.
		{[]string{"--tail", "1", "--follow"}, all[len(all)-1:]},
	} {
		code, out, errOut := f.client(append([]string{"logs", id}, tc.args...)...)
		// The step column is as wide as the lines shown need.
		got := strings.Fields(strings.Join(strings.Split(strings.TrimSuffix(out, "\n"), "\n"), " / "))
		want := strings.Fields(strings.Join(tc.want, " / "))
		if code != 0 || strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("logs %v: exit %d, stderr %q\n%s\nwant:\n%s", tc.args, code, errOut, out, strings.Join(tc.want, "\n"))
		}
	}
	if code, _, errOut := f.client("logs", id, "--tail", "-1"); code != 2 || !strings.Contains(errOut, "--tail") {
		t.Errorf("--tail -1: exit %d, stderr %q", code, errOut)
	}
}
