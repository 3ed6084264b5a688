package store

import (
	"bytes"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// Job lists under access control (engine.JobFilter.Visible). Visibility
// is judged by the access path stored on each job (engine.Job.AccessPath),
// and the access index groups jobs by workspace, access path and task,
// with a counter per group: the visible groups and their total come from
// the counters alone. A list filtered by nothing else (or by workspace or
// task) walks the visible groups' ranges merged newest first: hidden jobs
// are skipped without being read, a page is as full as the visible jobs
// allow, and it costs O(groups + limit x visible groups). A list also
// filtered by status or source walks that index and checks visibility on
// each entry's facets, counting its total by walking.

// restrictToVisible narrows the plan to the access groups f.Visible
// accepts, if it hides any.
func (p *jobPlan) restrictToVisible(tx *bolt.Tx) {
	if p.f.Visible == nil {
		return
	}
	ranges, hidden := visibleAccessRanges(tx, p.f)
	if !hidden {
		return
	}
	if len(p.f.Statuses) == 0 && p.f.SourceType == "" {
		p.ranges, p.residual = ranges, false
		return
	}
	p.residual = true
}

// visibleAccessRanges lists the access-index ranges, with their counters,
// of the groups within f's workspace and task filter that f.Visible
// accepts; hidden reports whether it refused any.
func visibleAccessRanges(tx *bolt.Tx, f engine.JobFilter) (ranges []jobRange, hidden bool) {
	kind := strPrefix("access")
	scan := kind
	if f.Workspace != "" {
		scan = strPrefix("access", f.Workspace)
	}
	c := tx.Bucket(bucketCounts).Cursor()
	for k, _ := c.Seek(scan); k != nil && bytes.HasPrefix(k, scan); k, _ = c.Next() {
		parts := bytes.Split(bytes.TrimSuffix(k[len(kind):], []byte{sep}), []byte{sep})
		if len(parts) != 3 {
			continue
		}
		ws, path, task := string(parts[0]), string(parts[1]), string(parts[2])
		if f.TaskName != "" && task != f.TaskName {
			continue
		}
		if !f.Visible(ws, path) {
			hidden = true
			continue
		}
		ranges = append(ranges, jobRange{bucketByAccess, accessPrefix(ws, path, task), countAccess(ws, path, task)})
	}
	return ranges, hidden
}
