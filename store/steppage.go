package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// StepSummary counts a job's step records per status: a read of its few
// maintained counters, whatever the job's size.
func (db *DB) StepSummary(ctx context.Context, jobID string) (map[string]int, error) {
	out := map[string]int{}
	err := db.view(ctx, func(tx *bolt.Tx) error {
		prefix := countStepStatusPrefix(jobID)
		b := tx.Bucket(bucketCounts)
		c := b.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			status := string(bytes.TrimSuffix(k[len(prefix):], []byte{sep}))
			out[status] = int(readCount(b, k))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("step summary of job %s: %w", jobID, err)
	}
	return out, nil
}

// StepsPage returns a job's steps in Seq order after q.After, at most
// q.Limit: a seek to the position, then one step per record read. With
// statuses it merges their ranges of the step status index; FlowOnly
// passes over for_each instances (`name[i]`) by key, without decoding them.
func (db *DB) StepsPage(ctx context.Context, jobID string, q engine.StepQuery) ([]*engine.Step, error) {
	var steps []*engine.Step
	err := db.view(ctx, func(tx *bolt.Tx) error {
		from := orderedInt(int64(q.After) + 1)
		var heads []*rangeHead
		if len(q.Statuses) == 0 {
			heads = append(heads, openAsc(tx, bucketSteps, stepsPrefix(jobID), from[:]))
		} else {
			seen := map[string]bool{}
			for _, st := range q.Statuses {
				if !seen[st] {
					seen[st] = true
					heads = append(heads, openAsc(tx, bucketStepStatus, stepStatusPrefix(jobID, st), from[:]))
				}
			}
		}
		sb := tx.Bucket(bucketSteps)
		for len(steps) < q.Limit {
			var best *rangeHead
			for _, h := range heads {
				if h.k != nil && (best == nil || bytes.Compare(h.k[len(h.r.prefix):], best.k[len(best.r.prefix):]) < 0) {
					best = h
				}
			}
			if best == nil {
				break
			}
			name := stepKeyName(best.k, best.r.prefix)
			val := best.v
			if len(q.Statuses) > 0 {
				val = sb.Get(best.v) // the index entry's value is the step's key
			}
			best.k, best.v = best.c.Next()
			if best.k != nil && !bytes.HasPrefix(best.k, best.r.prefix) {
				best.k = nil
			}
			if q.FlowOnly && bytes.HasSuffix(name, []byte("]")) || val == nil {
				continue
			}
			var s engine.Step
			if err := json.Unmarshal(val, &s); err != nil {
				return fmt.Errorf("decode step %s/%s: %w", jobID, name, err)
			}
			steps = append(steps, &s)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("steps of job %s: %w", jobID, err)
	}
	return steps, nil
}

// HasStep walks the keys of a job's steps, reading no record.
func (db *DB) HasStep(ctx context.Context, jobID, name string) (bool, error) {
	found := false
	err := db.view(ctx, func(tx *bolt.Tx) error {
		prefix := stepsPrefix(jobID)
		c := tx.Bucket(bucketSteps).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if string(stepKeyName(k, prefix)) == name {
				found = true
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("steps of job %s: %w", jobID, err)
	}
	return found, nil
}

// stepKeyName is the step name that ends key k of the steps bucket or the
// step status index, after the job's (and status's) prefix and the 8
// bytes of the step's Seq (see stepKey).
func stepKeyName(k, prefix []byte) []byte { return k[len(prefix)+8:] }

// openAsc positions a range on its first key at or after prefix+from.
func openAsc(tx *bolt.Tx, bucket, prefix, from []byte) *rangeHead {
	h := &rangeHead{r: jobRange{bucket: bucket, prefix: prefix}, c: tx.Bucket(bucket).Cursor()}
	h.k, h.v = h.c.Seek(joinKey(prefix, from))
	if h.k != nil && !bytes.HasPrefix(h.k, prefix) {
		h.k = nil
	}
	return h
}
