package store

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// TaskPathFunc says where a job's task was: the access path
// (workflow.TaskPath) of task in the given revision of the workspace, or
// else in its current revision; ok is false when neither holds the task.
type TaskPathFunc func(workspace, revision, task string) (path string, ok bool)

// fillAccessPaths is the migration of a database written before jobs
// carried their access path (engine.Job.AccessPath): it gives every job
// one, as close as the past allows to what it was created for, and builds
// the access index. Jobs are visited oldest first, so a hook job follows
// the job that fired it:
//   - a hook job takes the access path of the job that fired it;
//   - any other job takes its task's path in the revision it ran on, or in
//     the current revision (taskPath; nil knows no folders);
//   - a job whose task is in neither (removed before the upgrade), and a
//     hook job whose firing job is gone, keep the bare task name: the path
//     the server judged them by before, so the upgrade neither shows nor
//     hides them; an admin who must hide such old jobs adds a rule for
//     that name, or lets retention remove them.
func fillAccessPaths(tx *bolt.Tx, taskPath TaskPathFunc) error {
	jobs := tx.Bucket(bucketJobs)
	paths := map[string]string{} // by job id, for the hooks that follow
	deltas := counts{}
	c := tx.Bucket(bucketByTime).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		id := idAfterTime(k, 0)
		raw := jobs.Get([]byte(id))
		if raw == nil {
			continue
		}
		j := new(engine.Job)
		if err := json.Unmarshal(raw, j); err != nil {
			return fmt.Errorf("fill access path of job %s: %w", id, err)
		}
		if j.AccessPath == "" {
			j.AccessPath = guessAccessPath(j, paths, taskPath)
			old := jobIndexes(j)
			v, err := json.Marshal(j)
			if err != nil {
				return fmt.Errorf("fill access path of job %s: %w", id, err)
			}
			if err := jobs.Put([]byte(id), v); err != nil {
				return fmt.Errorf("fill access path of job %s: %w", id, err)
			}
			// The status and source entries' facets gain the path (same keys,
			// same counters); the access entry is new.
			for _, e := range old {
				if e.val != nil {
					if err := tx.Bucket(e.bucket).Put(e.key, e.val); err != nil {
						return fmt.Errorf("fill access path of job %s: %w", id, err)
					}
				}
			}
		}
		if err := moveIndexes(tx, deltas, nil, accessIndex(j)); err != nil {
			return err
		}
		paths[id] = j.AccessPath
	}
	return deltas.write(tx)
}

// accessIndex is a job's entry in the access index (see jobIndexes).
func accessIndex(j *engine.Job) []indexEntry {
	idx := jobIndexes(j)
	return idx[len(idx)-1:]
}

func guessAccessPath(j *engine.Job, paths map[string]string, taskPath TaskPathFunc) string {
	if j.SourceType == engine.SourceHook && j.SourceID != nil {
		if p, ok := paths[*j.SourceID]; ok {
			return p
		}
		return j.TaskName
	}
	if taskPath != nil {
		if p, ok := taskPath(j.Workspace, j.Revision, j.TaskName); ok {
			return p
		}
	}
	return j.TaskName
}
