package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/engine"
)

var _ engine.EventStore = (*DB)(nil)

const (
	upsertEventMarks = `INSERT INTO event_marks (job_id, step, run, seq)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[])
ON CONFLICT (job_id, step) DO UPDATE SET run = excluded.run, seq = excluded.seq`
	upsertEventCounts = `INSERT INTO event_counts (source, consumed)
SELECT * FROM unnest($1::text[], $2::int8[])
ON CONFLICT (source) DO UPDATE SET consumed = excluded.consumed`
)

// queueEventMarks queues a batch's marks and the sources' counts; the
// batch's last mark of a step, and last count of a source, win. They are
// the batch's last statements: what they refuse undoes the whole batch.
func queueEventMarks(batch *writes, marks []engine.EventMark) {
	if len(marks) == 0 {
		return
	}
	ptrs := make([]*engine.EventMark, len(marks))
	for i := range marks {
		ptrs[i] = &marks[i]
	}
	steps := lastByKey(ptrs, func(m *engine.EventMark) string { return m.JobID + "\x00" + m.Step })
	job, step, run, seq := make([]string, len(steps)), make([]string, len(steps)), make([]string, len(steps)), make([]int64, len(steps))
	for i, m := range steps {
		job[i], step[i], run[i], seq[i] = m.JobID, m.Step, m.Run, m.Seq
	}
	sources := lastByKey(ptrs, func(m *engine.EventMark) string { return m.Source })
	src, consumed := make([]string, len(sources)), make([]int64, len(sources))
	for i, m := range sources {
		src[i], consumed[i] = m.Source, m.Consumed
	}
	batch.Queue(upsertEventMarks, job, step, run, seq)
	batch.Queue(upsertEventCounts, src, consumed)
}

// EventMark returns the last line accepted from a consumer step's run.
func (db *DB) EventMark(ctx context.Context, jobID, step string) (run string, seq int64, err error) {
	if !storable(jobID, step) {
		return "", 0, nil
	}
	err = db.pool.QueryRow(ctx, `SELECT run, seq FROM event_marks WHERE job_id = $1 AND step = $2`, jobID, step).Scan(&run, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("read event mark of %s/%s: %w", jobID, step, err)
	}
	return run, seq, nil
}

// EventsConsumed returns how many events a trigger has had accepted.
func (db *DB) EventsConsumed(ctx context.Context, source string) (int64, error) {
	var n int64
	if !storable(source) {
		return 0, nil
	}
	err := db.pool.QueryRow(ctx, `SELECT consumed FROM event_counts WHERE source = $1`, source).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read events consumed of %s: %w", source, err)
	}
	return n, nil
}
