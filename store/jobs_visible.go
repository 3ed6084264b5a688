package store

import (
	"bytes"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// Job lists under access control (engine.JobFilter.Visible). The per-task
// counters name every (workspace, task) that has jobs, so the visible
// tasks and their total come from the counters alone. A list filtered by
// nothing else walks the visible tasks' time indexes merged newest first:
// hidden jobs are skipped without being read, a page is as full as the
// visible jobs allow, and it costs O(tasks with jobs + limit x visible
// tasks). A list also filtered by status or source walks that index and
// checks visibility on each entry's facets, counting its total by walking.

// restrictToVisible narrows the plan to the tasks f.Visible accepts, if
// it hides any.
func (p *jobPlan) restrictToVisible(tx *bolt.Tx) {
	if p.f.Visible == nil {
		return
	}
	ranges, hidden := visibleTaskRanges(tx, p.f)
	if !hidden {
		return
	}
	if len(p.f.Statuses) == 0 && p.f.SourceType == "" {
		p.ranges, p.residual = ranges, false
		return
	}
	p.residual = true
}

// visibleTaskRanges lists the task-index ranges, with their counters, of
// the tasks within f's workspace and task filter that f.Visible accepts;
// hidden reports whether it refused any.
func visibleTaskRanges(tx *bolt.Tx, f engine.JobFilter) (ranges []jobRange, hidden bool) {
	counts := tx.Bucket(bucketCounts)
	kind := strPrefix("task")
	scan := kind
	switch {
	case f.TaskName != "":
		scan = countTask(f.Workspace, f.TaskName)
	case f.Workspace != "":
		scan = strPrefix("task", f.Workspace)
	}
	c := counts.Cursor()
	for k, _ := c.Seek(scan); k != nil && bytes.HasPrefix(k, scan); k, _ = c.Next() {
		parts := bytes.Split(bytes.TrimSuffix(k[len(kind):], []byte{sep}), []byte{sep})
		if len(parts) != 2 {
			continue
		}
		ws, task := string(parts[0]), string(parts[1])
		if !f.Visible(ws, task) {
			hidden = true
			continue
		}
		ranges = append(ranges, jobRange{bucketByTask, taskPrefix(ws, task), countTask(ws, task)})
	}
	return ranges, hidden
}
