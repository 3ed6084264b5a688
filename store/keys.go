package store

import (
	"bytes"
	"encoding/binary"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

// sep separates variable-length key parts; names and ids may not contain it.
const sep = 0

// orderedInt encodes v so that byte order is numeric order, negatives included.
func orderedInt(v int64) [8]byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v)^(1<<63))
	return b
}

// timeBytes is a sortable time: Unix nanoseconds, big-endian.
func timeBytes(t time.Time) [8]byte { return orderedInt(t.UnixNano()) }

func joinKey(parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	k := make([]byte, 0, n)
	for _, p := range parts {
		k = append(k, p...)
	}
	return k
}

// strPrefix is s followed by the separator.
func strPrefix(s ...string) []byte {
	var b []byte
	for _, p := range s {
		b = append(b, p...)
		b = append(b, sep)
	}
	return b
}

// stepKey sorts a job's steps by Seq, so Steps is one prefix scan. The
// engine fixes a step's Seq when it creates the record; it never changes.
func stepKey(jobID string, seq int, name string) []byte {
	s := orderedInt(int64(seq))
	return joinKey(strPrefix(jobID), s[:], []byte(name))
}

func stepsPrefix(jobID string) []byte { return strPrefix(jobID) }

// stepStatusKey orders a job's steps of one status by Seq, as the steps
// bucket does.
func stepStatusKey(s *engine.Step) []byte {
	seq := orderedInt(int64(s.Seq))
	return joinKey(stepStatusPrefix(s.JobID, s.Status), seq[:], []byte(s.Name))
}

func stepStatusPrefix(jobID, status string) []byte { return strPrefix(jobID, status) }

// jobTimeID is the suffix shared by every job index: newest-first iteration
// walks it backwards, and the job id is what follows the 8 time bytes.
func jobTimeID(j *engine.Job) []byte {
	t := timeBytes(j.CreatedAt)
	return joinKey(t[:], []byte(j.ID))
}

// idAfterTime extracts the id from a key of the form prefix + time + id.
func idAfterTime(key []byte, prefixLen int) string {
	return string(key[prefixLen+8:])
}

func workspacePrefix(ws string) []byte  { return strPrefix(ws) }
func statusPrefix(status string) []byte { return strPrefix(status) }
func sourcePrefix(source string) []byte { return strPrefix(source) }

// jobFacets is the value of a job's status and source index entries: what
// a list query filters on beside the index's own key.
func jobFacets(j *engine.Job) []byte {
	return strPrefix(j.Workspace, j.TaskName, j.SourceType, j.AccessPath)
}

// facets are a job's jobFacets, parsed.
type facets struct{ ws, task, source, access string }

func parseFacets(v []byte) (facets, bool) {
	parts := bytes.Split(v, []byte{sep})
	if len(parts) != 5 {
		return facets{}, false
	}
	return facets{string(parts[0]), string(parts[1]), string(parts[2]), string(parts[3])}, true
}
func taskPrefix(ws, task string) []byte { return strPrefix(ws, task) }

// accessPrefix groups a job by what access control judges it by (its
// workspace and access path), then by task: the visible jobs of a list
// filtered by task are a few of these ranges too.
func accessPrefix(ws, path, task string) []byte { return strPrefix(ws, path, task) }

func sourceID(j *engine.Job) string {
	if j.SourceID == nil {
		return ""
	}
	return *j.SourceID
}

// workerStepKey orders a worker's steps by the time the step became ready:
// steps are claimed FIFO by ready time, and ReadyAt, unlike StartedAt, is
// already set when the claim writes the worker id.
func workerStepKey(s *engine.Step) []byte {
	if s.WorkerID == nil || *s.WorkerID == "" {
		return nil
	}
	var t time.Time
	switch {
	case s.ReadyAt != nil:
		t = *s.ReadyAt
	case s.StartedAt != nil:
		t = *s.StartedAt
	}
	tb := timeBytes(t)
	return joinKey(strPrefix(*s.WorkerID), tb[:], strPrefix(s.JobID), []byte(s.Name))
}

func workerOrderKey(w *engine.Worker) []byte {
	t := timeBytes(w.RegisteredAt)
	return joinKey(t[:], []byte(w.ID))
}

// prefixEnd is the smallest key greater than every key with the prefix, or
// nil when there is none (all 0xff).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Counter names.
const (
	countJobs    = "jobs"
	countWorkers = "workers"
)

// Per-item counters start with their kind and a separator, so no two kinds
// can produce the same key whatever the names.
func countWorkspace(ws string) []byte  { return strPrefix("ws", ws) }
func countTask(ws, task string) []byte { return strPrefix("task", ws, task) }
func countAccess(ws, path, task string) []byte {
	return strPrefix("access", ws, path, task)
}
func countWorkerSteps(workerID string) []byte { return strPrefix("wsteps", workerID) }
func countStatus(status string) []byte        { return strPrefix("status", status) }
func countSource(source string) []byte        { return strPrefix("source", source) }
func countStepStatus(jobID, status string) []byte {
	return strPrefix("jsteps", jobID, status)
}
func countStepStatusPrefix(jobID string) []byte { return strPrefix("jsteps", jobID) }
