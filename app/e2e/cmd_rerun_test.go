package e2e

import (
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/app/config"
)

func TestRerunFromFailedReusesTheCompletedStepsAndFollowsTheNewJob(t *testing.T) {
	rerunFromFailedReusesTheCompletedSteps(t)
}

func rerunFromFailedReusesTheCompletedSteps(t *testing.T, storage ...func(*config.Server)) {
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 2, storage...)
	code, out, errOut := f.client("run", "pipeline", "--input", "fail_tests=true", "--follow")
	if code != 1 {
		t.Fatalf("run pipeline: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	old := strings.SplitN(out, "\n", 2)[0]
	lint := f.job(old).step("lint")

	// The old job's task succeeds with fail_tests=false; lint is not run again.
	code, out, errOut = f.client("rerun", old, "--from-failed", "--input", "fail_tests=false", "--follow")
	if code != 0 {
		t.Fatalf("rerun: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	id := lines[0]
	if !jobIDLine.MatchString(id) || id == old {
		t.Fatalf("first line %q is not the new job's id; stdout:\n%s", id, out)
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "job "+id+" completed in ") {
		t.Errorf("last line = %q, want the new job's completion", last)
	}
	j := f.job(id)
	if j.RerunOf != old || j.Input["fail_tests"] != false {
		t.Errorf("re-run: rerun_of %q input %v", j.RerunOf, j.Input)
	}
	if s := j.step("lint"); s.Status != "completed" || s.ReusedFrom != old || s.WorkerID != nil || !s.StartedAt.Equal(*lint.StartedAt) {
		t.Errorf("lint = %+v, want reused from %s with the old times and no worker", s, old)
	}
	if s := j.step("unit-tests"); s.Status != "completed" || s.ReusedFrom != "" {
		t.Errorf("unit-tests = %+v, want run again", s)
	}
	if strings.Contains(out, "lint ok") {
		t.Errorf("the reused lint step ran again:\n%s", out)
	}
}

func TestRerunRefusesFromFailedOnACompletedJob(t *testing.T) {
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 2)
	id := runHello(t, f)

	code, out, errOut := f.client("rerun", id, "--from-failed")
	if code != 1 || out != "" || !strings.Contains(errOut, "only a failed or cancelled job") {
		t.Errorf("rerun --from-failed of a completed job: exit %d, stdout %q, stderr %q; want 1 and the 409 text", code, out, errOut)
	}
	code, out, errOut = f.client("rerun", id)
	if code != 0 || !jobIDLine.MatchString(strings.TrimSpace(out)) {
		t.Fatalf("rerun: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if j := f.waitTerminal(strings.TrimSpace(out)); j.Status != "completed" || j.Input["name"] != "Ada" || j.RerunOf != id {
		t.Errorf("re-run: status %s input %v rerun_of %q, want the old input", j.Status, j.Input, j.RerunOf)
	}
	code, _, errOut = f.client("rerun", id, "--input", "nmae=x")
	if code != 1 || !strings.Contains(errOut, "nmae") {
		t.Errorf("rerun with an unknown input key: exit %d, stderr %q", code, errOut)
	}
}
