package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// SweepBatch bounds the records (jobs and steps) one sweep transaction
// deletes: bbolt has one writer, so the orchestrator's next commit waits
// for it. 200 deletes take about 2.5 ms with the fsync
// (BenchmarkDeleteEndedJobs).
const SweepBatch = 200

// SweepResult is what one DeleteEndedJobs transaction did.
type SweepResult struct {
	Jobs  []string // ids of the jobs deleted
	Steps int      // step records deleted, of those jobs or of one cut short
	// Next is where the following call resumes its walk (nil: the walk
	// reached the cutoff, nothing older is left to look at).
	Next []byte
}

// sweptJob is the part of a job record the sweep reads: decoding only
// these fields skips the inputs and outputs.
type sweptJob struct {
	ID           string     `json:"job_id"`
	Workspace    string     `json:"workspace"`
	TaskName     string     `json:"task_name"`
	AccessPath   string     `json:"access_path"`
	Status       string     `json:"status"`
	SourceType   string     `json:"source_type"`
	CreatedAt    time.Time  `json:"created_at"`
	CompletedAt  *time.Time `json:"completed_at"`
	HooksPending bool       `json:"hooks_pending"`
}

// ended says when the job ended, or false while it is live or its hooks
// are pending. A job that never started ended when it was created.
func (j *sweptJob) ended() (time.Time, bool) {
	if !engine.JobTerminal(j.Status) || j.HooksPending {
		return time.Time{}, false
	}
	if j.CompletedAt != nil {
		return *j.CompletedAt, true
	}
	return j.CreatedAt, true
}

// sweptStep is the part of a step record its index keys are made of.
type sweptStep struct {
	JobID     string     `json:"job_id"`
	Name      string     `json:"step_name"`
	Seq       int        `json:"seq"`
	Status    string     `json:"status"`
	WorkerID  *string    `json:"worker_id"`
	ReadyAt   *time.Time `json:"ready_at"`
	StartedAt *time.Time `json:"started_at"`
}

// DeleteEndedJobs deletes, in one write transaction, up to budget records
// of jobs that ended before cutoff, oldest first: each job with its steps,
// its index entries and its share of the counters. A live job, or an ended
// one whose hooks are pending, is never touched. Ended jobs are no longer
// the orchestrator's (it forgets a job once its end is committed), and
// bbolt serializes this transaction with its commits, so no decision is
// lost. Call it again from res.Next until Next is nil. A job with more
// steps than budget loses them over several calls, the record last, so a
// crash midway leaves it to the next sweep.
func (db *DB) DeleteEndedJobs(ctx context.Context, cutoff time.Time, from []byte, budget int) (SweepResult, error) {
	var res SweepResult
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if budget <= 0 {
		budget = SweepBatch
	}
	limit := timeBytes(cutoff)
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		res = SweepResult{}
		deltas := counts{}
		c := tx.Bucket(bucketByTime).Cursor()
		k, _ := c.First()
		if from != nil {
			k, _ = c.Seek(from)
		}
		// Candidates are gathered first: deleting under a bbolt cursor can
		// make it skip keys.
		type candidate struct {
			key []byte
			job *sweptJob
		}
		var found []candidate
		active := tx.Bucket(bucketActive)
		scanned := 0
		for ; k != nil; k, _ = c.Next() {
			// Creation time prefixes the key: a job ends after it was
			// created, so nothing from here on ended before the cutoff.
			if bytes.Compare(k[:8], limit[:]) >= 0 {
				k = nil
				break
			}
			if scanned == budget {
				break
			}
			scanned++
			id := idAfterTime(k, 0)
			if active.Get([]byte(id)) != nil {
				continue
			}
			j, err := decodeSweptJob(tx, id)
			if err != nil {
				return err
			}
			if end, ok := j.ended(); !ok || !end.Before(cutoff) {
				continue
			}
			found = append(found, candidate{key: bytes.Clone(k), job: j})
		}
		if k != nil {
			res.Next = bytes.Clone(k)
		}
		left := budget
		for _, cand := range found {
			n, done, err := deleteJob(tx, cand.job, left, deltas)
			if err != nil {
				return err
			}
			res.Steps += n
			left -= n
			if !done {
				res.Next = cand.key // resume with this job
				break
			}
			res.Jobs = append(res.Jobs, cand.job.ID)
			if left--; left <= 0 {
				res.Next = nextKey(cand.key)
				break
			}
		}
		return deltas.write(tx)
	})
	if err != nil {
		return SweepResult{}, fmt.Errorf("delete ended jobs: %w", err)
	}
	return res, nil
}

// nextKey is the smallest key after k.
func nextKey(k []byte) []byte { return append(bytes.Clone(k), 0) }

func decodeSweptJob(tx *bolt.Tx, id string) (*sweptJob, error) {
	v := tx.Bucket(bucketJobs).Get([]byte(id))
	if v == nil {
		return nil, fmt.Errorf("job %s is indexed but has no record", id)
	}
	var j sweptJob
	if err := json.Unmarshal(v, &j); err != nil {
		return nil, fmt.Errorf("decode job %s: %w", id, err)
	}
	return &j, nil
}

// deleteJob deletes up to budget of the job's steps and, when none is left
// and budget allows, the job with its index entries. Counter changes go to
// deltas, applied once per transaction.
func deleteJob(tx *bolt.Tx, j *sweptJob, budget int, deltas counts) (steps int, done bool, err error) {
	stepsB := tx.Bucket(bucketSteps)
	prefix := stepsPrefix(j.ID)
	var keys [][]byte
	var idx []indexEntry
	var names []string
	c := stepsB.Cursor()
	k, v := c.Seek(prefix)
	for ; k != nil && bytes.HasPrefix(k, prefix) && len(keys) < budget; k, v = c.Next() {
		var s sweptStep
		if err := json.Unmarshal(v, &s); err != nil {
			return 0, false, fmt.Errorf("decode step of job %s: %w", j.ID, err)
		}
		keys = append(keys, bytes.Clone(k))
		names = append(names, s.Name)
		idx = append(idx, stepIndexes(&engine.Step{JobID: j.ID, Name: s.Name, Seq: s.Seq, Status: s.Status, WorkerID: s.WorkerID, ReadyAt: s.ReadyAt, StartedAt: s.StartedAt})...)
	}
	more := k != nil && bytes.HasPrefix(k, prefix)
	for _, key := range keys {
		if err := stepsB.Delete(key); err != nil {
			return 0, false, fmt.Errorf("delete step of job %s: %w", j.ID, err)
		}
	}
	if err := dropIndexes(tx, idx, deltas); err != nil {
		return 0, false, err
	}
	if j.SourceType == engine.SourceTrigger { // only event-source consumers mark their steps
		if err := deleteEventMarks(tx, j.ID, names); err != nil {
			return 0, false, err
		}
	}
	if more {
		return len(keys), false, nil
	}
	job := &engine.Job{ID: j.ID, Workspace: j.Workspace, TaskName: j.TaskName, AccessPath: j.AccessPath, Status: j.Status, SourceType: j.SourceType, CreatedAt: j.CreatedAt}
	if err := dropIndexes(tx, jobIndexes(job), deltas); err != nil {
		return 0, false, err
	}
	if err := tx.Bucket(bucketJobs).Delete([]byte(j.ID)); err != nil {
		return 0, false, fmt.Errorf("delete job %s: %w", j.ID, err)
	}
	return len(keys), true, nil
}

// dropIndexes deletes the entries, adding their counters' changes to deltas.
func dropIndexes(tx *bolt.Tx, entries []indexEntry, deltas counts) error {
	for _, e := range entries {
		if e.key == nil {
			continue
		}
		b := tx.Bucket(e.bucket)
		if b.Get(e.key) == nil {
			continue // never indexed: no counter counted it
		}
		if err := b.Delete(e.key); err != nil {
			return fmt.Errorf("delete index %s: %w", e.bucket, err)
		}
		deltas.add(e.count, -1)
	}
	return nil
}
