package api_test

import (
	"strings"
	"testing"
)

// An error names each thing once: "job X: not found", never
// "job X: job X: not found" (a store error wrapped again by its caller).
func TestNotFoundErrorsNameTheirThingOnce(t *testing.T) {
	f := newFixture(t)
	const id = "0190a0a0-0000-7000-8000-000000000000"
	w := f.register("w1")
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/api/jobs/" + id, "job " + id + ": not found"},
		{"POST", "/api/jobs/" + id + "/cancel", "job " + id + ": not found"},
		{"POST", "/api/jobs/" + id + "/rerun", "job " + id + ": not found"},
		{"GET", "/api/jobs/" + id + "/logs", "job " + id + ": not found"},
		{"GET", "/api/workers/" + id, "worker " + id + ": not found"},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			r := f.in(t).api(c.method, c.path, nil)
			r.expectError(404, c.want)
			if msg := r.errorMessage(); msg != c.want {
				t.Errorf("error %q, want exactly %q", msg, c.want)
			}
		})
	}
	t.Run("worker step complete", func(t *testing.T) {
		r := f.in(t).worker("POST", "/worker/jobs/"+id+"/steps/s/complete", map[string]any{"worker_id": w, "exit_code": 0})
		if msg := r.errorMessage(); strings.Count(msg, id) > 1 {
			t.Errorf("error %q names the job more than once", msg)
		}
	})
}
