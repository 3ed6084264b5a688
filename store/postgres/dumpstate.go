package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store/dump"
)

var _ dump.Store = (*DB)(nil)

// DumpState reads the small tables an export carries whole: auth links,
// trigger fires, event marks and counts, in one snapshot.
func (db *DB) DumpState(ctx context.Context) (dump.State, error) {
	var s dump.State
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		links, err := tx.Query(ctx, `SELECT record FROM auth_links ORDER BY provider, subject`)
		if err != nil {
			return err
		}
		s.AuthLinks, err = pgx.CollectRows(links, func(r pgx.CollectableRow) (accounts.AuthLink, error) {
			var raw []byte
			var l accounts.AuthLink
			if err := r.Scan(&raw); err != nil {
				return l, err
			}
			return l, json.Unmarshal(raw, &l)
		})
		if err != nil {
			return fmt.Errorf("auth links: %w", err)
		}
		fires, err := tx.Query(ctx, `SELECT workspace, trigger, fired_at FROM trigger_fires ORDER BY workspace, trigger`)
		if err != nil {
			return err
		}
		s.Fires, err = pgx.CollectRows(fires, func(r pgx.CollectableRow) (engine.TriggerFire, error) {
			var f engine.TriggerFire
			var at string
			if err := r.Scan(&f.Workspace, &f.Trigger, &at); err != nil {
				return f, err
			}
			f.At, err = time.Parse(time.RFC3339Nano, at)
			return f, err
		})
		if err != nil {
			return fmt.Errorf("trigger fires: %w", err)
		}
		marks, err := tx.Query(ctx, `SELECT job_id, step, run, seq FROM event_marks ORDER BY job_id, step`)
		if err != nil {
			return err
		}
		s.Marks, err = pgx.CollectRows(marks, func(r pgx.CollectableRow) (dump.Mark, error) {
			var m dump.Mark
			return m, r.Scan(&m.JobID, &m.Step, &m.Run, &m.Seq)
		})
		if err != nil {
			return fmt.Errorf("event marks: %w", err)
		}
		counts, err := tx.Query(ctx, `SELECT source, consumed FROM event_counts ORDER BY source`)
		if err != nil {
			return err
		}
		s.Consumed, err = pgx.CollectRows(counts, func(r pgx.CollectableRow) (dump.Consumed, error) {
			var c dump.Consumed
			return c, r.Scan(&c.Source, &c.Count)
		})
		if err != nil {
			return fmt.Errorf("event counts: %w", err)
		}
		return nil
	})
	return s, err
}

// RestoreState writes what DumpState read, in one transaction.
func (db *DB) RestoreState(ctx context.Context, s dump.State) error {
	return pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		for _, l := range s.AuthLinks {
			rec, err := json.Marshal(l)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO auth_links (provider, subject, user_id, record) VALUES ($1, $2, $3, $4)`,
				l.Provider, l.Subject, l.UserID, string(rec)); err != nil {
				return fmt.Errorf("auth link %s/%s: %w", l.Provider, l.Subject, err)
			}
		}
		for _, f := range s.Fires {
			if _, err := tx.Exec(ctx, `INSERT INTO trigger_fires (workspace, trigger, fired_at) VALUES ($1, $2, $3)`,
				f.Workspace, f.Trigger, f.At.UTC().Format(time.RFC3339Nano)); err != nil {
				return fmt.Errorf("trigger %s/%s: %w", f.Workspace, f.Trigger, err)
			}
		}
		for _, m := range s.Marks {
			if _, err := tx.Exec(ctx, `INSERT INTO event_marks (job_id, step, run, seq) VALUES ($1, $2, $3, $4)`,
				m.JobID, m.Step, m.Run, m.Seq); err != nil {
				return fmt.Errorf("event mark of job %s step %s: %w", m.JobID, m.Step, err)
			}
		}
		for _, c := range s.Consumed {
			if _, err := tx.Exec(ctx, `INSERT INTO event_counts (source, consumed) VALUES ($1, $2)`, c.Source, c.Count); err != nil {
				return fmt.Errorf("event count of %s: %w", c.Source, err)
			}
		}
		return nil
	})
}
