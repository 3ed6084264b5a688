package e2e

import "testing"

// TestOneStepJobCommitsAtMostThreeTimes enforces the durable-commit budget
// of a one-step job on the real server (bbolt, in-process workers running
// `true`), one job at a time so that no group commit hides a commit: its
// creation, its start report (which carries the claim) and its completion.
// Commits are the engine's calls to the store's Commit, each one bbolt
// transaction with its fsyncs.
func TestOneStepJobCommitsAtMostThreeTimes(t *testing.T) {
	dir := t.TempDir()
	writeWorkspace(t, dir, chainWorkspace(1))
	f := startFixture(t, map[string]string{"bench": dir}, 4)
	const jobs = 20
	before := f.srv.engine.Commits()
	for range jobs {
		id := f.execute("bench", "one", nil)
		f.waitDone(id)
		if j := f.job(id); j.Status != "completed" {
			t.Fatalf("job %s is %s", id, j.Status)
		}
	}
	commits := f.srv.engine.Commits() - before
	if commits > 3*jobs {
		t.Errorf("%d one-step jobs took %d durable commits (%.2f each), want at most 3 each", jobs, commits, float64(commits)/jobs)
	}
	t.Logf("%d one-step jobs, %d durable commits", jobs, commits)
}
