package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/engine"
)

var _ engine.StepPager = (*DB)(nil)

// StepSummary counts a job's step records per status: its few maintained
// counts, whatever the job's size.
func (db *DB) StepSummary(ctx context.Context, jobID string) (map[string]int, error) {
	out := map[string]int{}
	if !storable(jobID) {
		return out, nil
	}
	rows, err := db.pool.Query(ctx, `SELECT status, n FROM step_counts WHERE job_id = $1 AND n > 0`, jobID)
	if err != nil {
		return nil, fmt.Errorf("step summary of job %s: %w", jobID, err)
	}
	var status string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&status, &n}, func() error { out[status] = n; return nil }); err != nil {
		return nil, fmt.Errorf("step summary of job %s: %w", jobID, err)
	}
	return out, nil
}

// StepsPage returns a job's steps in Seq order after q.After, at most
// q.Limit: a range of the primary key from the position, or with
// statuses one range of the status index per status, merged. FlowOnly
// passes over for_each instances (`name[i]`) by name.
func (db *DB) StepsPage(ctx context.Context, jobID string, q engine.StepQuery) ([]*engine.Step, error) {
	if q.Limit <= 0 || !storable(jobID) {
		return nil, nil
	}
	var statuses []string
	for _, s := range q.Statuses {
		if !slices.Contains(statuses, s) {
			statuses = append(statuses, s)
		}
	}
	var args sqlArgs
	conds := []string{"job_id = " + args.add(jobID), "seq > " + args.add(int64(q.After))}
	if q.FlowOnly {
		conds = append(conds, "right(name, 1) <> ']'")
	}
	// The limit is in the statement's text, as a job list page's is
	// (limitClause).
	order := " ORDER BY seq, name" + limitClause(q.Limit)
	var sql string
	switch len(statuses) {
	case 0:
		sql = "SELECT rec FROM steps" + where(conds) + order
	case 1:
		sql = "SELECT rec FROM steps" + where(append(conds, "status = "+args.add(statuses[0]))) + order
	default:
		sql = "SELECT s.rec FROM unnest(" + args.add(statuses) + "::text[]) AS r(status) CROSS JOIN LATERAL (SELECT seq, name FROM steps" +
			where(append(conds, "status = r.status")) + order + ") x JOIN steps s ON (s.job_id, s.seq, s.name) = ($1, x.seq, x.name) ORDER BY x.seq, x.name" + limitClause(q.Limit)
	}
	steps, err := queryRecords[engine.Step](ctx, db.pool, "step", sql, args...)
	if err != nil {
		return nil, fmt.Errorf("steps of job %s: %w", jobID, err)
	}
	return steps, nil
}

// HasStep looks the name up among the job's steps' keys, reading no record.
func (db *DB) HasStep(ctx context.Context, jobID, name string) (bool, error) {
	var found bool
	if !storable(jobID, name) {
		return false, nil
	}
	err := db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM steps WHERE job_id = $1 AND name = $2)`, jobID, name).Scan(&found)
	if err != nil {
		return false, fmt.Errorf("steps of job %s: %w", jobID, err)
	}
	return found, nil
}
