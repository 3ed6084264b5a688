package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store"
)

// ReadLog writes the lines q selects from the job's log to w as the rows
// arrive, so memory stays constant whatever the log's size, and says which
// lines it wrote. Every replica reads the same rows, whichever wrote them.
//
// One statement reads the lines, so its snapshot is the read's: lines
// appended meanwhile are left for the next read (q.After = the page's
// Next). A tail first reads the log's length, then the lines up to it.
func (l *Logs) ReadLog(ctx context.Context, jobID string, q engine.LogQuery, w io.Writer) (engine.LogPage, error) {
	if err := store.ValidJobID(jobID); err != nil {
		return engine.LogPage{}, fmt.Errorf("read log: %w", err)
	}
	after, end := int64(q.After), int64(math.MaxInt64)
	if q.Tail > 0 {
		total, err := l.db.logLength(ctx, jobID, q.Step)
		if err != nil {
			return engine.LogPage{}, err
		}
		after, end = max(0, total-int64(q.Tail)), total
	}
	n, err := l.db.readLines(ctx, jobID, q.Step, after, end, w)
	page := engine.LogPage{Lines: int(n), Next: int(after + n)}
	if err != nil {
		return page, fmt.Errorf("read log of job %s: %w", jobID, err)
	}
	return page, nil
}

// logLength is how many lines the job's log holds, or its step's.
func (db *DB) logLength(ctx context.Context, jobID, step string) (int64, error) {
	if step == "" {
		n, _, err := db.logTotals(ctx, jobID)
		return n, err
	}
	var n *int64
	err := db.pool.QueryRow(ctx, `SELECT max(step_end) FROM job_log_chunks WHERE job_id = $1 AND step = $2`, jobID, step).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read log of job %s: %w", jobID, err)
	}
	if n == nil {
		return 0, nil
	}
	return *n, nil
}

// readLines writes lines after+1..end of the job's log (of one step when
// step is set) to w and says how many it wrote. The first row may start
// before after+1: its first lines are skipped.
func (db *DB) readLines(ctx context.Context, jobID, step string, after, end int64, w io.Writer) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var rows pgx.Rows
	var err error
	if step == "" {
		rows, err = db.pool.Query(ctx, `SELECT line_end, lines, data FROM job_log_chunks
			WHERE job_id = $1 AND line_end > $2 AND line_end <= $3 ORDER BY line_end`, jobID, after, end)
	} else {
		rows, err = db.pool.Query(ctx, `SELECT step_end, lines, data FROM job_log_chunks
			WHERE job_id = $1 AND step = $2 AND step_end > $3 AND step_end <= $4 ORDER BY step_end`, jobID, step, after, end)
	}
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var written int64
	for rows.Next() {
		var rowEnd int64
		var lines int32
		var data []byte
		if err := rows.Scan(&rowEnd, &lines, &data); err != nil {
			return written, err
		}
		skip := after - (rowEnd - int64(lines))
		if skip > 0 {
			data = skipLines(data, skip)
		} else {
			skip = 0
		}
		if _, err := w.Write(data); err != nil {
			return written, err
		}
		written += int64(lines) - skip
		if err := ctx.Err(); err != nil {
			return written, err
		}
	}
	return written, rows.Err()
}

// skipLines drops the first n lines of JSONL data.
func skipLines(data []byte, n int64) []byte {
	for ; n > 0; n-- {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return nil
		}
		data = data[i+1:]
	}
	return data
}

// Stored says whether the database holds a log for the job, and the bytes
// of its lines.
func (l *Logs) Stored(jobID string) (int64, bool, error) {
	if err := store.ValidJobID(jobID); err != nil {
		return 0, false, fmt.Errorf("read log: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), logTimeout)
	defer cancel()
	var size int64
	err := l.db.pool.QueryRow(ctx, `SELECT bytes FROM job_logs WHERE job_id = $1`, jobID).Scan(&size)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read log of job %s: %w", jobID, err)
	}
	return size, true, nil
}

// AppendNote appends a line to a log the database holds, keeping its
// last-written time, so a note about the log does not restart its
// retention.
func (l *Logs) AppendNote(jobID string, line engine.LogLine) error {
	if _, ok, err := l.Stored(jobID); err != nil || !ok {
		return err
	}
	return l.LogHub.AppendNote(jobID, line)
}

// Remove deletes the job's log from the database (an archived copy
// stays). It waits for an append under way here, so no line lands in a
// log being removed.
func (l *Logs) Remove(jobID string) (removed bool, err error) {
	if err := store.ValidJobID(jobID); err != nil {
		return false, fmt.Errorf("remove log: %w", err)
	}
	err = l.Locked(jobID, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), logTimeout)
		defer cancel()
		defer l.med.forget(jobID)
		b := &pgx.Batch{}
		b.Queue(`DELETE FROM job_log_runs WHERE job_id = $1`, jobID)
		b.Queue(`DELETE FROM job_log_chunks WHERE job_id = $1`, jobID)
		b.Queue(`DELETE FROM job_logs WHERE job_id = $1`, jobID).Exec(func(tag pgconn.CommandTag) error {
			removed = tag.RowsAffected() > 0
			return nil
		})
		return l.db.pool.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return removed, fmt.Errorf("remove log of job %s: %w", jobID, err)
	}
	return removed, nil
}

// LastWrittenBefore lists the jobs whose log was last written before t.
func (l *Logs) LastWrittenBefore(t time.Time) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), logTimeout)
	defer cancel()
	rows, err := l.db.pool.Query(ctx, `SELECT job_id FROM job_logs WHERE written_at < $1 ORDER BY job_id`, t)
	if err != nil {
		return nil, fmt.Errorf("list logs: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list logs: %w", err)
	}
	return ids, nil
}
