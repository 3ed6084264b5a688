package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// indexEntry is one key a record has in an index bucket; a nil key means
// the record is absent from that index (a terminal job in the active index,
// once its hooks are no longer pending).
type indexEntry struct {
	bucket []byte
	key    []byte
	val    []byte // usually empty: index keys carry all they need
	count  []byte // counter kept in step with the index, or nil
}

// jobIndexes lists a job's index keys in a fixed order, so an update can
// compare the old and new lists position by position.
func jobIndexes(j *engine.Job) []indexEntry {
	tid := jobTimeID(j)
	var active []byte
	if !engine.JobTerminal(j.Status) || j.HooksPending {
		active = []byte(j.ID)
	}
	return []indexEntry{
		{bucket: bucketByTime, key: tid, count: []byte(countJobs)},
		{bucket: bucketByWorkspace, key: joinKey(workspacePrefix(j.Workspace), tid), count: countWorkspace(j.Workspace)},
		{bucket: bucketByTask, key: joinKey(taskPrefix(j.Workspace, j.TaskName), tid), count: countTask(j.Workspace, j.TaskName)},
		{bucket: bucketActive, key: active},
		{bucket: bucketByStatus, key: joinKey(statusPrefix(j.Status), tid), val: jobFacets(j), count: countStatus(j.Status)},
		{bucket: bucketBySource, key: joinKey(sourcePrefix(j.SourceType), tid), val: jobFacets(j), count: countSource(j.SourceType)},
		{bucket: bucketByAccess, key: joinKey(accessPrefix(j.Workspace, j.AccessPath, j.TaskName), tid), count: countAccess(j.Workspace, j.AccessPath, j.TaskName)},
	}
}

// rebuildListIndexes fills the status and source indexes, and their
// counters, from the jobs bucket: the migration of a database made before
// they existed.
func rebuildListIndexes(tx *bolt.Tx) error {
	deltas := counts{}
	if err := tx.Bucket(bucketJobs).ForEach(func(_, v []byte) error {
		var j engine.Job
		if err := json.Unmarshal(v, &j); err != nil {
			return fmt.Errorf("rebuild list indexes: %w", err)
		}
		var added []indexEntry
		for _, e := range jobIndexes(&j) {
			if bytes.Equal(e.bucket, bucketByStatus) || bytes.Equal(e.bucket, bucketBySource) {
				added = append(added, e)
			}
		}
		return moveIndexes(tx, deltas, nil, added)
	}); err != nil {
		return err
	}
	return deltas.write(tx)
}

// moveIndexes turns the old entries into the new ones, touching only those
// that changed, and adds the counters' changes to deltas. old is nil for
// an insert.
func moveIndexes(tx *bolt.Tx, deltas counts, old, cur []indexEntry) error {
	for i, n := range cur {
		var o indexEntry
		if old != nil {
			o = old[i]
		}
		if o.key != nil && bytes.Equal(o.key, n.key) && bytes.Equal(o.val, n.val) {
			continue
		}
		if o.key != nil {
			if err := tx.Bucket(o.bucket).Delete(o.key); err != nil {
				return fmt.Errorf("delete index %s: %w", o.bucket, err)
			}
			deltas.add(o.count, -1)
		}
		if n.key != nil {
			if err := tx.Bucket(n.bucket).Put(n.key, n.val); err != nil {
				return fmt.Errorf("put index %s: %w", n.bucket, err)
			}
			deltas.add(n.count, 1)
		}
	}
	return nil
}

// stepIndexes mirrors the step's one worker_id: when a recovered step is
// claimed again, it moves to the new holder's list.
func stepIndexes(s *engine.Step) []indexEntry {
	var count []byte
	if s.WorkerID != nil {
		count = countWorkerSteps(*s.WorkerID)
	}
	// The entry's value is the step's key, so WorkerSteps fetches the record
	// without scanning the job's steps. The status entry and its per-job
	// counter serve steps_summary and a status page of a big job's steps.
	sk := stepKey(s.JobID, s.Seq, s.Name)
	return []indexEntry{
		{bucket: bucketWorkerSteps, key: workerStepKey(s), val: sk, count: count},
		{bucket: bucketStepStatus, key: stepStatusKey(s), val: sk, count: countStepStatus(s.JobID, s.Status)},
	}
}

// rebuildStepStatusIndex fills the step status index and its counters
// from the steps bucket: the migration of a database made before it.
func rebuildStepStatusIndex(tx *bolt.Tx) error {
	deltas := counts{}
	if err := tx.Bucket(bucketSteps).ForEach(func(_, v []byte) error {
		var s engine.Step
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("rebuild step status index: %w", err)
		}
		return moveIndexes(tx, deltas, nil, stepIndexes(&s)[1:])
	}); err != nil {
		return err
	}
	return deltas.write(tx)
}

func workerIndexes(w *engine.Worker) []indexEntry {
	return []indexEntry{{bucket: bucketWorkerOrder, key: workerOrderKey(w), count: []byte(countWorkers)}}
}

// counts gathers a transaction's counter changes, written once at its end
// (write): a commit that moves many records between the same index keys
// reads and writes each counter once, not twice a record.
type counts map[string]int64

func (c counts) add(name []byte, delta int64) {
	if name != nil {
		c[string(name)] += delta
	}
}

func (c counts) write(tx *bolt.Tx) error {
	for name, d := range c {
		if d == 0 {
			continue
		}
		if err := addCount(tx, []byte(name), d); err != nil {
			return err
		}
	}
	return nil
}

// addCount adjusts a maintained counter; a counter that reaches zero is
// deleted so per-workspace and per-worker keys do not pile up.
func addCount(tx *bolt.Tx, name []byte, delta int64) error {
	if name == nil {
		return nil
	}
	b := tx.Bucket(bucketCounts)
	n := int64(readCount(b, name)) + delta
	if n <= 0 {
		if err := b.Delete(name); err != nil {
			return fmt.Errorf("delete counter: %w", err)
		}
		return nil
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(n))
	if err := b.Put(name, v[:]); err != nil {
		return fmt.Errorf("put counter: %w", err)
	}
	return nil
}

func readCount(b *bolt.Bucket, name []byte) uint64 {
	v := b.Get(name)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}
