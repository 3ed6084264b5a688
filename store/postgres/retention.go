package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store"
)

// DeleteEndedJobs deletes, in one transaction, up to budget records of
// jobs that ended before cutoff, oldest first: each job with its steps
// (their counts follow, by trigger) and, for an event source's consumer,
// its steps' event marks. A live job, or an ended one whose hooks are
// pending, is never touched, and the delete checks it again, so a job
// that became live meanwhile stays. Call it again from res.Next until
// Next is nil: the walk goes by creation time, budget jobs at most, and
// stops at the cutoff, as bbolt's does. A job with more steps than the
// budget left loses them over several calls, the record last.
//
// from and Next are positions in creation order: 8 bytes of time (as
// bbolt's keys) then the job id, a trailing NUL meaning "just after it".
func (db *DB) DeleteEndedJobs(ctx context.Context, cutoff time.Time, from []byte, budget int) (store.SweepResult, error) {
	var res store.SweepResult
	if budget <= 0 {
		budget = store.SweepBatch
	}
	fromNs, fromID, after := parsePosition(from)
	op := ">="
	if after {
		op = ">"
	}
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if err := db.fenceTx(ctx, tx); err != nil {
			return err
		}
		res = store.SweepResult{}
		type candidate struct {
			id      string
			created int64
			trigger bool
			steps   int
		}
		var (
			found   []candidate
			c       candidate
			ended   bool
			scanned int
		)
		rows, err := tx.Query(ctx, `SELECT id, created_ns, NOT active AND ended_ns < $1, source_type = $5,
				CASE WHEN NOT active AND ended_ns < $1 THEN (SELECT count(*) FROM steps s WHERE s.job_id = j.id) ELSE 0 END
			FROM jobs j WHERE created_ns < $1 AND (created_ns, id) `+op+` ($2, $3)
			ORDER BY created_ns, id LIMIT $4`, cutoff.UnixNano(), fromNs, fromID, budget+1, engine.SourceTrigger)
		if err != nil {
			return err
		}
		_, err = pgx.ForEachRow(rows, []any{&c.id, &c.created, &ended, &c.trigger, &c.steps}, func() error {
			if scanned == budget { // the walk resumes here
				res.Next = position(c.created, c.id, false)
				return nil
			}
			scanned++
			if ended {
				found = append(found, c)
			}
			return nil
		})
		if err != nil || len(found) == 0 {
			return err
		}
		// What the budget allows, in order: whole jobs, then maybe the
		// first steps of one more.
		var whole []string
		var part *candidate
		partSteps, left := 0, budget
		for i := range found {
			c := &found[i]
			if c.steps > left {
				part, partSteps = c, left
				res.Next = position(c.created, c.id, false) // resume with this job
				break
			}
			whole = append(whole, c.id)
			left -= c.steps
			if left--; left <= 0 {
				res.Next = position(c.created, c.id, true)
				break
			}
		}
		batch := &pgx.Batch{}
		var gone []string
		var n int
		if len(whole) > 0 {
			batch.Queue(`WITH j AS (DELETE FROM jobs WHERE id = ANY($1) AND NOT active AND ended_ns < $2 RETURNING id, source_type),
				s AS (DELETE FROM steps WHERE job_id IN (SELECT id FROM j) RETURNING 1),
				m AS (DELETE FROM event_marks WHERE job_id IN (SELECT id FROM j WHERE source_type = $3))
				SELECT array(SELECT id FROM j), (SELECT count(*) FROM s)`, whole, cutoff.UnixNano(), engine.SourceTrigger).
				QueryRow(func(r pgx.Row) error { return r.Scan(&gone, &n) })
		}
		var m int
		if part != nil && partSteps > 0 {
			batch.Queue(`WITH s AS (DELETE FROM steps WHERE (job_id, seq, name) IN (
					SELECT job_id, seq, name FROM steps WHERE job_id = $1
						AND EXISTS (SELECT 1 FROM jobs WHERE id = $1 AND NOT active AND ended_ns < $3)
					ORDER BY seq, name LIMIT $2) RETURNING name),
				m AS (DELETE FROM event_marks WHERE $4 AND job_id = $1 AND step IN (SELECT name FROM s))
				SELECT count(*) FROM s`, part.id, partSteps, cutoff.UnixNano(), part.trigger).
				QueryRow(func(r pgx.Row) error { return r.Scan(&m) })
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		for _, id := range whole { // oldest first, as they were found
			if slices.Contains(gone, id) {
				res.Jobs = append(res.Jobs, id)
			}
		}
		res.Steps = n + m
		return nil
	})
	if err != nil {
		return store.SweepResult{}, fmt.Errorf("delete ended jobs: %w", err)
	}
	return res, nil
}

// position is a place in creation order, as bbolt's time index keys are
// (8 bytes of time, then the id), just after the job when after is set.
func position(createdNs int64, id string, after bool) []byte {
	b := make([]byte, 8, 9+len(id))
	binary.BigEndian.PutUint64(b, uint64(createdNs)^(1<<63))
	b = append(b, id...)
	if after {
		b = append(b, 0)
	}
	return b
}

// parsePosition reads a position; nil (or anything shorter) is the start.
func parsePosition(p []byte) (createdNs int64, id string, after bool) {
	if len(p) < 8 {
		return -1 << 63, "", false
	}
	createdNs = int64(binary.BigEndian.Uint64(p[:8]) ^ (1 << 63))
	rest := p[8:]
	if n := len(rest); n > 0 && rest[n-1] == 0 {
		return createdNs, string(rest[:n-1]), true
	}
	return createdNs, string(rest), false
}

// EndedBefore returns those of ids whose job ended before cutoff (hooks
// no longer pending), or that have no job record any more.
func (db *DB) EndedBefore(ctx context.Context, ids []string, cutoff time.Time) ([]string, error) {
	rows, err := db.pool.Query(ctx, `SELECT i.id FROM unnest($1::text[]) WITH ORDINALITY AS i(id, n)
		LEFT JOIN jobs j ON j.id = i.id
		WHERE j.id IS NULL OR (NOT j.active AND j.ended_ns < $2) ORDER BY i.n`, ids, cutoff.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("find ended jobs: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find ended jobs: %w", err)
	}
	return out, nil
}
