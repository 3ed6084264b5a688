package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/config"
)

// revisionWorkspace runs a file of the workspace after an approval: the
// test edits the file while the job waits.
const revisionWorkspace = `tasks:
  release:
    flow:
      ask:
        type: approval
        message: ship it?
      ship:
        depends_on: [ask]
        type: script
        script: sh ./run.sh
`

func writeRunScript(t *testing.T, ws, version string) {
	t.Helper()
	writeFile(t, filepath.Join(ws, "run.sh"), "echo 'OUTPUT: {\"version\": \""+version+"\"}'\n")
}

// currentRevision is the revision the server serves workspace main on.
func (f *serverFixture) currentRevision() string {
	f.t.Helper()
	var list []workspaceInfo
	do(f.t, "GET", f.url+"/api/workspaces", nil, &list)
	for _, w := range list {
		if w.Name == "main" {
			return w.Revision
		}
	}
	return ""
}

type workspaceInfo struct {
	Name     string `json:"name"`
	Revision string `json:"revision"`
}

// editRunScript rewrites run.sh and waits for the server to load the new
// revision, which it returns.
func (f *serverFixture) editRunScript(ws, version string) string {
	f.t.Helper()
	before := f.currentRevision()
	writeRunScript(f.t.(*testing.T), ws, version)
	return waitFor(f.t, "the edited workspace to load", f.currentRevision, func(r string) bool { return r != before })
}

func (f *serverFixture) approve(id, step string) {
	f.t.Helper()
	if code := do(f.t, "POST", f.url+"/api/jobs/"+id+"/steps/"+step+"/approve", map[string]any{"approved": true}, nil); code != 200 {
		f.t.Fatalf("approve %s of job %s: %d", step, id, code)
	}
}

func shippedVersion(t *testing.T, j jobView) any {
	t.Helper()
	if j.Status != "completed" {
		t.Fatalf("job %s: %+v", j.Status, j.Steps)
	}
	out, _ := j.step("ship").Output.(map[string]any)
	return out["version"]
}

func TestEditedScriptDoesNotChangeAJobWaitingBetweenSteps(t *testing.T) {
	for _, mode := range []string{"in-process", "remote"} {
		t.Run(mode, func(t *testing.T) {
			ws := t.TempDir()
			writeWorkspace(t, ws, revisionWorkspace)
			writeRunScript(t, ws, "old")
			var f *serverFixture
			if mode == "in-process" {
				f = startFixture(t, map[string]string{"main": ws}, 1)
			} else {
				f = startFixture(t, map[string]string{"main": ws}, 0, func(c *config.Server) { c.WorkerToken = workerToken })
				startWorkerProcess(t, f.url, workerToken, "remote-rev", "")
			}
			old := f.execute("main", "release", nil)
			f.waitJob(old, "the approval to wait", func(j jobView) bool { return j.step("ask").Status == "waiting" })

			f.editRunScript(ws, "new")
			fresh := f.execute("main", "release", nil)
			f.waitJob(fresh, "the approval to wait", func(j jobView) bool { return j.step("ask").Status == "waiting" })
			f.approve(old, "ask")
			f.approve(fresh, "ask")

			if v := shippedVersion(t, f.waitTerminal(old)); v != "old" {
				t.Errorf("the job created before the edit ran version %v, want old", v)
			}
			if v := shippedVersion(t, f.waitTerminal(fresh)); v != "new" {
				t.Errorf("the job created after the edit ran version %v, want new", v)
			}
		})
	}
}

func TestRevisionSnapshotLivesExactlyAsLongAsAJobNeedsIt(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, revisionWorkspace)
	writeRunScript(t, ws, "one")
	one := 1
	r := startRestartable(t, map[string]string{"main": ws}, func(c *config.Server) { c.Workers = &one })
	f := r.fixture()
	rev1 := f.currentRevision()
	job := f.execute("main", "release", nil)
	f.waitJob(job, "the approval to wait", func(j jobView) bool { return j.step("ask").Status == "waiting" })
	rev2 := f.editRunScript(ws, "two") // no job uses it
	rev3 := f.editRunScript(ws, "three")

	snap := func(rev string) string { return filepath.Join(r.cfg.DataDir, "revisions", "main", rev+".tar.gz") }
	exists := func(rev string) bool { _, err := os.Stat(snap(rev)); return err == nil }
	for _, rev := range []string{rev1, rev2, rev3} {
		if !exists(rev) {
			t.Fatalf("no snapshot of loaded revision %s", rev)
		}
	}
	// A sweep within the grace period removes nothing; past it (grace 0
	// here), only the revision no job uses goes.
	if n, err := r.srv.sweepRevisions(context.Background(), time.Now(), r.srv.revisionSweepGrace); err != nil || n != 0 {
		t.Fatalf("sweep within the grace period: removed %d, %v", n, err)
	}
	sweep := func() (int, error) {
		return r.srv.sweepRevisions(context.Background(), time.Now(), 0)
	}
	if n, err := sweep(); err != nil || n != 1 {
		t.Fatalf("sweep: removed %d, %v; want 1", n, err)
	}
	if exists(rev2) || !exists(rev1) || !exists(rev3) {
		t.Fatalf("after a sweep: rev1 (live job) %v, rev2 (unused) %v, rev3 (current) %v; want true, false, true",
			exists(rev1), exists(rev2), exists(rev3))
	}

	// Across a restart the registry forgets revision 1, but its snapshot
	// stays, and the waiting job runs on it.
	r.stop()
	r.start()
	f = r.fixture()
	if n, err := sweep(); err != nil || n != 0 || !exists(rev1) {
		t.Fatalf("sweep after a restart: removed %d, %v; revision of the live job kept: %v", n, err, exists(rev1))
	}
	f.approve(job, "ask")
	if v := shippedVersion(t, f.waitTerminal(job)); v != "one" {
		t.Fatalf("after a restart the job ran version %v of its script, want one (its revision's)", v)
	}
	// The job leaves the engine's memory once its end is durable, a moment
	// after the API shows it: the sweep that follows removes its revision.
	type swept struct {
		n   int
		err error
	}
	if got := waitFor(t, "a sweep to remove the ended job's revision", func() swept {
		n, err := sweep()
		return swept{n, err}
	}, func(s swept) bool { return s.err != nil || s.n > 0 }); got.err != nil || got.n != 1 || exists(rev1) {
		t.Fatalf("sweep once the job ended: removed %d, %v; its revision still there: %v", got.n, got.err, exists(rev1))
	}
}

// inlineWorkspace has the script in the YAML: its definition is part of
// the revision too.
const inlineWorkspace = `tasks:
  release:
    flow:
      ask:
        type: approval
        message: ship it?
      ship:
        depends_on: [ask]
        type: script
        script: "echo 'OUTPUT: {\"version\": \"%s\"}'"
`

func TestJobKeepsItsRevisionsDefinitionsAcrossARestart(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, fmt.Sprintf(inlineWorkspace, "old"))
	one := 1
	r := startRestartable(t, map[string]string{"main": ws}, func(c *config.Server) { c.Workers = &one })
	f := r.fixture()
	job := f.execute("main", "release", nil)
	f.waitJob(job, "the approval to wait", func(j jobView) bool { return j.step("ask").Status == "waiting" })
	before := f.currentRevision()
	writeWorkspace(t, ws, fmt.Sprintf(inlineWorkspace, "new"))
	waitFor(t, "the edited workspace to load", f.currentRevision, func(r string) bool { return r != before })

	// The restarted server loads only the folder's revision; the job's own
	// comes back from its snapshot.
	r.stop()
	r.start()
	f = r.fixture()
	f.approve(job, "ask")
	if v := shippedVersion(t, f.waitTerminal(job)); v != "old" {
		t.Fatalf("after a restart the job ran the %v inline script, want old (its revision's)", v)
	}
	fresh := f.execute("main", "release", nil)
	f.waitJob(fresh, "the approval to wait", func(j jobView) bool { return j.step("ask").Status == "waiting" })
	f.approve(fresh, "ask")
	if v := shippedVersion(t, f.waitTerminal(fresh)); v != "new" {
		t.Fatalf("a new job ran the %v inline script, want new", v)
	}
}
