package store

import (
	"bytes"
	"container/heap"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// Job lists under access control (engine.JobFilter.Visible). The per-task
// counters name every (workspace, task) that has jobs, so the visible
// tasks, and their total, come from the counters alone; the page is the
// visible tasks' time indexes merged newest first, so hidden jobs are
// skipped without being read and a page is as full as the visible jobs
// allow. Cost: O(tasks with jobs) + O((offset + limit) log tasks).

// taskScope is one visible task: its key prefix in the task index and
// its job count.
type taskScope struct {
	prefix []byte
	count  int
}

// visibleTasks lists the tasks within f's workspace and task filter that
// f.Visible accepts; hidden reports whether it refused any. Without
// f.Visible nothing is hidden.
func visibleTasks(tx *bolt.Tx, f engine.JobFilter) (scopes []taskScope, hidden bool) {
	if f.Visible == nil {
		return nil, false
	}
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
	for k, v := c.Seek(scan); k != nil && bytes.HasPrefix(k, scan); k, v = c.Next() {
		parts := bytes.Split(bytes.TrimSuffix(k[len(kind):], []byte{sep}), []byte{sep})
		if len(parts) != 2 {
			continue
		}
		ws, task := string(parts[0]), string(parts[1])
		if !f.Visible(ws, task) {
			hidden = true
			continue
		}
		n := 0
		if len(v) == 8 {
			n = int(readCount(counts, k))
		}
		scopes = append(scopes, taskScope{prefix: taskPrefix(ws, task), count: n})
	}
	return scopes, hidden
}

// mergedNewestIDs walks the task index under each scope's prefix from the
// newest key, merged by (time, id) descending, skips offset and returns
// the ids of the next limit.
func mergedNewestIDs(b *bolt.Bucket, scopes []taskScope, offset, limit int) []string {
	h := make(newestFirst, 0, len(scopes))
	for _, sc := range scopes {
		c := b.Cursor()
		if k, _ := seekLast(c, sc.prefix); k != nil && bytes.HasPrefix(k, sc.prefix) {
			h = append(h, &taskCursor{c: c, prefix: sc.prefix, key: k})
		}
	}
	heap.Init(&h)
	var ids []string
	for len(h) > 0 && len(ids) < limit {
		top := h[0]
		if offset > 0 {
			offset--
		} else {
			ids = append(ids, idAfterTime(top.key, len(top.prefix)))
		}
		if k, _ := top.c.Prev(); k != nil && bytes.HasPrefix(k, top.prefix) {
			top.key = k
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	return ids
}

// taskCursor is one task's position in its index.
type taskCursor struct {
	c      *bolt.Cursor
	prefix []byte
	key    []byte
}

func (t *taskCursor) timeID() []byte { return t.key[len(t.prefix):] }

// newestFirst is a max-heap of cursors by the (time, id) under them.
type newestFirst []*taskCursor

func (h newestFirst) Len() int           { return len(h) }
func (h newestFirst) Less(i, j int) bool { return bytes.Compare(h[i].timeID(), h[j].timeID()) > 0 }
func (h newestFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *newestFirst) Push(x any)        { *h = append(*h, x.(*taskCursor)) }
func (h *newestFirst) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
