package api_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestLogsTailAndAfterPageThroughTheLog reads a job's log in pieces, by
// step and whole, and checks each piece, its line count and where the
// next one starts against the full log.
func TestLogsTailAndAfterPageThroughTheLog(t *testing.T) {
	f := newFixture(t)
	// With no worker yet, the engine notes under _server that the ready step
	// waits for one (the step is ready once its input has rendered).
	id := f.execute("x")
	eventually(t, "a _server line", func() bool {
		logs := f.api("GET", "/api/jobs/"+id+"/logs", nil).expect(200).object()["logs"].(string)
		return strings.Contains(logs, `"step":"_server"`)
	})
	w := f.register("w1")
	f.claimStep(w, id, "say")
	f.pushLogs(w, id, "say", "l1", "l2", `l3 "quoted" \ back`, "l4 é", "l5")

	full := f.api("GET", "/api/jobs/"+id+"/logs", nil).expect(200).object()
	all := splitLines(full["logs"].(string))
	if len(all) < 6 || full["lines"] != float64(len(all)) || full["next"] != float64(len(all)) {
		t.Fatalf("whole log = %v, want the 5 say lines, the _server ones and lines = next = their count", full)
	}
	var server []string
	for _, l := range all {
		if strings.Contains(l, `"step":"_server"`) {
			server = append(server, l)
		}
	}
	say := splitLines(f.api("GET", "/api/jobs/"+id+"/steps/say/logs", nil).expect(200).object()["logs"].(string))
	if len(say) != 5 {
		t.Fatalf("say log = %q", say)
	}
	n := len(all)
	for _, tc := range []struct {
		path  string
		query string
		want  []string
		next  int
	}{
		{"/logs", "tail=2", all[n-2:], n},
		{"/logs", "tail=1", all[n-1:], n},
		{"/logs", "tail=1000", all, n},
		{"/logs", "after=0", all, n},
		{"/logs", "after=2", all[2:], n},
		{"/logs", fmt.Sprint("after=", n-1), all[n-1:], n},
		{"/logs", fmt.Sprint("after=", n), nil, n},
		{"/logs", "after=1000", nil, 1000},
		{"/steps/say/logs", "tail=2", say[3:], 5},
		{"/steps/say/logs", "tail=5", say, 5},
		{"/steps/say/logs", "tail=9", say, 5},
		{"/steps/say/logs", "after=3", say[3:], 5},
		{"/steps/say/logs", "after=5", nil, 5},
		{"/steps/say/logs", "", say, 5},
		{"/steps/_server/logs", "tail=1", server[len(server)-1:], len(server)},
		{"/steps/_server/logs", "after=0", server, len(server)},
		{"/steps/after/logs", "tail=3", nil, 0},
		{"/steps/after/logs", "after=2", nil, 2},
	} {
		t.Run(tc.path+"?"+tc.query, func(t *testing.T) {
			got := f.in(t).api("GET", "/api/jobs/"+id+tc.path+"?"+tc.query, nil).expect(200).object()
			lines := splitLines(got["logs"].(string))
			if strings.Join(lines, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("logs = %q, want %q", lines, tc.want)
			}
			if got["lines"] != float64(len(tc.want)) || got["next"] != float64(tc.next) {
				t.Fatalf("lines, next = %v, %v; want %d, %d", got["lines"], got["next"], len(tc.want), tc.next)
			}
		})
	}

	missing := "00000000-0000-4000-8000-000000000000"
	f.api("GET", "/api/jobs/"+missing+"/logs?tail=5", nil).expect(404).errorMessage()
	f.api("GET", "/api/jobs/"+missing+"/steps/say/logs?after=1", nil).expect(404).errorMessage()
	f.api("GET", "/api/jobs/"+id+"/steps/nope/logs?tail=5", nil).expect(404).errorMessage()
	for _, q := range []string{"tail=0", "tail=-1", "tail=x", "tail=1.5", "after=-1", "after=x", "tail=1&after=1", "after=99999999999999999999"} {
		for _, path := range []string{"/logs", "/steps/say/logs"} {
			f.api("GET", "/api/jobs/"+id+path+"?"+q, nil).expect(400).errorMessage()
		}
	}
}

// splitLines splits JSONL into its lines, none for "".
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
