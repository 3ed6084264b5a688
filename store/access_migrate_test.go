package store

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// A database written before jobs carried their access path gets one for
// every job on its first start: the task's folder in the revision the job
// ran on (not the current one), the firing job's for a hook job, and the
// bare task name when the task is gone; lists filter and count by it.
func TestOpenFillsTheAccessPathOfJobsWrittenWithoutIt(t *testing.T) {
	db, path := openTemp(t)
	ctx := context.Background()
	jobOf := func(id, task, rev string, i int) *engine.Job {
		j := newJob(id, "prod", task, i)
		j.Revision = rev
		return j
	}
	hook := func(id, firing string, i int) *engine.Job {
		j := jobOf(id, "notify", "r1", i)
		j.SourceType, j.SourceID = engine.SourceHook, ptr(firing)
		return j
	}
	jobs := []*engine.Job{
		jobOf("old-deploy", "deploy", "r1", 1), // deploy was in the secret folder then
		hook("old-hook", "old-deploy", 2),      // its hook, named like nothing hidden
		jobOf("new-deploy", "deploy", "r2", 3), // deploy moved out of the folder
		jobOf("gone", "removed", "r1", 4),      // a task no revision holds
		hook("orphan-hook", "swept-away", 5),   // its firing job was deleted
		jobOf("unsnapshotted", "deploy", "r0", 6),
	}
	commit(t, db, &engine.Batch{Jobs: jobs})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	writeWithoutAccessPaths(t, path)

	folders := map[string]map[string]string{ // revision -> task -> path
		"r1": {"deploy": "secret/deploy"},
		"r2": {"deploy": "deploy"},
		"":   {"deploy": "deploy"}, // the current revision
	}
	taskPath := func(ws, rev, task string) (string, bool) {
		if ws != "prod" {
			t.Errorf("asked for workspace %q", ws)
		}
		if p, ok := folders[rev][task]; ok {
			return p, true
		}
		p, ok := folders[""][task]
		return p, ok
	}
	db, err := OpenWith(path, Options{TaskPath: taskPath})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want := map[string]string{
		"old-deploy": "secret/deploy", "old-hook": "secret/deploy", "new-deploy": "deploy",
		"gone": "removed", "orphan-hook": "notify", "unsnapshotted": "deploy",
	}
	for id, p := range want {
		j, err := db.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.AccessPath != p {
			t.Errorf("job %s: access path %q, want %q", id, j.AccessPath, p)
		}
	}
	assertCountsMatchIndexes(t, db)
	hidden := func(_, path string) bool { return !strings.HasPrefix(path, "secret/") }
	for _, f := range []engine.JobFilter{{}, {Workspace: "prod", TaskName: "notify"}, {Statuses: []string{engine.JobPending}}, {SourceType: engine.SourceHook}} {
		f.Visible = hidden
		got, total, err := db.Jobs(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range got {
			if j.ID == "old-deploy" || j.ID == "old-hook" {
				t.Errorf("filter %+v lists hidden job %s", f, j.ID)
			}
		}
		if total != len(got) {
			t.Errorf("filter %+v: total %d for %d jobs", f, total, len(got))
		}
	}
	if _, total, _ := db.Jobs(ctx, engine.JobFilter{Visible: hidden}); total != 4 {
		t.Errorf("visible total %d, want 4", total)
	}
}

// writeWithoutAccessPaths turns the database at path into what a server
// from before access paths wrote: no access_path in job records, no
// access index or counters, and status and source facets without it.
func writeWithoutAccessPaths(t *testing.T, path string) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketByAccess); err != nil {
			return err
		}
		counts := tx.Bucket(bucketCounts)
		var drop [][]byte
		counts.ForEach(func(k, _ []byte) error {
			if bytes.HasPrefix(k, strPrefix("access")) {
				drop = append(drop, bytes.Clone(k))
			}
			return nil
		})
		for _, k := range drop {
			if err := counts.Delete(k); err != nil {
				return err
			}
		}
		jobs := tx.Bucket(bucketJobs)
		var old []*engine.Job
		jobs.ForEach(func(k, v []byte) error {
			var m map[string]any
			if err := json.Unmarshal(v, &m); err != nil {
				return err
			}
			delete(m, "access_path")
			nv, _ := json.Marshal(m)
			var j engine.Job
			json.Unmarshal(nv, &j)
			old = append(old, &j)
			return jobs.Put(bytes.Clone(k), nv)
		})
		for _, j := range old {
			for _, e := range jobIndexes(j) {
				if bytes.Equal(e.bucket, bucketByStatus) || bytes.Equal(e.bucket, bucketBySource) {
					if err := tx.Bucket(e.bucket).Put(e.key, strPrefix(j.Workspace, j.TaskName, j.SourceType)); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
