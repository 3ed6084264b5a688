package store

import (
	"bytes"
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// Jobs returns a page of jobs, newest first, and the total matching the
// filter. It walks the narrowest index (status, then task, workspace,
// source type, else creation time) backwards from the cursor, or from the
// newest, and decodes only the jobs of the page: a cursor page costs
// O(limit) at any depth. Several statuses merge their index ranges. A
// filter the chosen index does not cover is checked on the entry's value
// (its facets), never by decoding a job; the total is then counted on that
// index, otherwise it is a maintained counter.
func (db *DB) Jobs(ctx context.Context, f engine.JobFilter) ([]*engine.Job, int, error) {
	if f.TaskName != "" && f.Workspace == "" {
		return nil, 0, fmt.Errorf("list jobs: task filter %q needs a workspace: %w", f.TaskName, engine.ErrInvalid)
	}
	if f.Offset < 0 {
		return nil, 0, fmt.Errorf("list jobs: negative offset %d: %w", f.Offset, engine.ErrInvalid)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	var (
		jobs  []*engine.Job
		total int
	)
	err := db.view(ctx, func(tx *bolt.Tx) error {
		plan := planJobs(f)
		plan.restrictToVisible(tx)
		ranges := plan.open(tx, f.Cursor)
		if plan.residual {
			total = plan.count(tx)
		} else {
			for _, r := range plan.ranges {
				total += int(readCount(tx.Bucket(bucketCounts), r.counter))
			}
		}
		skip := f.Offset
		for len(jobs) < limit {
			id, ok := plan.next(ranges)
			if !ok {
				break
			}
			if skip > 0 {
				skip--
				continue
			}
			j, err := getJob(tx, id)
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, total, nil
}

// jobPlan is the index ranges a job query walks and what it still checks.
type jobPlan struct {
	ranges   []jobRange
	f        engine.JobFilter
	residual bool // some filter is checked on entry values
}

// jobRange is one prefix of an index bucket.
type jobRange struct {
	bucket  []byte
	prefix  []byte
	counter []byte
}

func planJobs(f engine.JobFilter) *jobPlan {
	p := &jobPlan{f: f}
	switch {
	case len(f.Statuses) > 0:
		seen := map[string]bool{}
		for _, st := range f.Statuses {
			if !seen[st] {
				seen[st] = true
				p.ranges = append(p.ranges, jobRange{bucketByStatus, statusPrefix(st), countStatus(st)})
			}
		}
		p.residual = f.Workspace != "" || f.SourceType != ""
	case f.SourceType != "" && f.Workspace != "":
		// The source index's entries carry the workspace and task.
		p.ranges = []jobRange{{bucketBySource, sourcePrefix(f.SourceType), nil}}
		p.residual = true
	case f.SourceType != "":
		p.ranges = []jobRange{{bucketBySource, sourcePrefix(f.SourceType), countSource(f.SourceType)}}
	case f.TaskName != "":
		p.ranges = []jobRange{{bucketByTask, taskPrefix(f.Workspace, f.TaskName), countTask(f.Workspace, f.TaskName)}}
	case f.Workspace != "":
		p.ranges = []jobRange{{bucketByWorkspace, workspacePrefix(f.Workspace), countWorkspace(f.Workspace)}}
	default:
		p.ranges = []jobRange{{bucketByTime, nil, []byte(countJobs)}}
	}
	return p
}

// rangeHead is an open range: its cursor and current entry, or k nil at
// its end.
type rangeHead struct {
	r    jobRange
	c    *bolt.Cursor
	k, v []byte
}

// open positions every range on its newest entry older than the cursor.
func (p *jobPlan) open(tx *bolt.Tx, cur *engine.JobCursor) []*rangeHead {
	heads := make([]*rangeHead, 0, len(p.ranges))
	for _, r := range p.ranges {
		h := &rangeHead{r: r, c: tx.Bucket(r.bucket).Cursor()}
		if cur == nil {
			h.k, h.v = seekLast(h.c, r.prefix)
		} else {
			t := orderedInt(cur.CreatedAt)
			target := joinKey(r.prefix, t[:], []byte(cur.ID))
			if k, _ := h.c.Seek(target); k == nil {
				h.k, h.v = h.c.Last()
			} else {
				h.k, h.v = h.c.Prev()
			}
		}
		if h.k != nil && !bytes.HasPrefix(h.k, r.prefix) {
			h.k = nil
		}
		heads = append(heads, h)
	}
	return heads
}

// next is the id of the newest entry among the heads that passes the
// residual filters, advancing past it.
func (p *jobPlan) next(heads []*rangeHead) (string, bool) {
	for {
		var best *rangeHead
		for _, h := range heads {
			if h.k != nil && (best == nil || bytes.Compare(h.k[len(h.r.prefix):], best.k[len(best.r.prefix):]) > 0) {
				best = h
			}
		}
		if best == nil {
			return "", false
		}
		id, ok := idAfterTime(best.k, len(best.r.prefix)), p.match(best.v)
		best.k, best.v = best.c.Prev()
		if best.k != nil && !bytes.HasPrefix(best.k, best.r.prefix) {
			best.k = nil
		}
		if ok {
			return id, true
		}
	}
}

// count is the total of a query with residual filters: every entry of its
// ranges is checked.
func (p *jobPlan) count(tx *bolt.Tx) int {
	n := 0
	for _, h := range p.open(tx, nil) {
		for k, v := h.k, h.v; k != nil && bytes.HasPrefix(k, h.r.prefix); k, v = h.c.Prev() {
			if p.match(v) {
				n++
			}
		}
	}
	return n
}

// match checks the residual filters against an entry's facets.
func (p *jobPlan) match(v []byte) bool {
	if !p.residual {
		return true
	}
	fc, ok := parseFacets(v)
	if !ok {
		return false
	}
	f := p.f
	return (f.Workspace == "" || fc.ws == f.Workspace) && (f.TaskName == "" || fc.task == f.TaskName) &&
		(f.SourceType == "" || fc.source == f.SourceType) && (f.Visible == nil || f.Visible(fc.ws, fc.access))
}
