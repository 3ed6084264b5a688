package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/engine"
)

// LastFire returns when a workspace's trigger last fired, and false when it
// never has (or nothing was recorded).
func (db *DB) LastFire(ws, trigger string) (time.Time, bool, error) {
	if err := checkTrigger(ws, trigger); err != nil {
		return time.Time{}, false, err
	}
	var v string
	if !storable(ws, trigger) {
		return time.Time{}, false, nil
	}
	err := db.pool.QueryRow(context.Background(),
		`SELECT fired_at FROM trigger_fires WHERE workspace = $1 AND trigger = $2`, ws, trigger).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read last fire of trigger %s/%s: %w", ws, trigger, err)
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("decode last fire of trigger %s/%s: %w", ws, trigger, err)
	}
	return t, true, nil
}

// SetLastFire records, durably, when a workspace's trigger last fired.
func (db *DB) SetLastFire(ws, trigger string, t time.Time) error {
	batch := &writes{}
	if err := queueFires(batch, []engine.TriggerFire{{Workspace: ws, Trigger: trigger, At: t}}); err != nil {
		return err
	}
	if err := db.send(context.Background(), batch); err != nil {
		return fmt.Errorf("record last fire of trigger %s/%s: %w", ws, trigger, err)
	}
	return nil
}

const upsertFires = `INSERT INTO trigger_fires (workspace, trigger, fired_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
ON CONFLICT (workspace, trigger) DO UPDATE SET fired_at = excluded.fired_at`

// queueFires checks a batch's fires and queues them, the last of a
// trigger winning; times are kept as bbolt keeps them, RFC 3339 with
// nanoseconds in UTC.
func queueFires(batch *writes, fires []engine.TriggerFire) error {
	if len(fires) == 0 {
		return nil
	}
	ptrs := make([]*engine.TriggerFire, len(fires))
	for i := range fires {
		if err := checkTrigger(fires[i].Workspace, fires[i].Trigger); err != nil {
			return err
		}
		ptrs[i] = &fires[i]
	}
	last := lastByKey(ptrs, func(f *engine.TriggerFire) string { return f.Workspace + "\x00" + f.Trigger })
	ws, name, at := make([]string, len(last)), make([]string, len(last)), make([]string, len(last))
	for i, f := range last {
		ws[i], name[i], at[i] = f.Workspace, f.Trigger, f.At.UTC().Format(time.RFC3339Nano)
	}
	batch.Queue(upsertFires, ws, name, at)
	return nil
}

func checkTrigger(ws, trigger string) error {
	if ws == "" || trigger == "" {
		return fmt.Errorf("trigger state needs a workspace and a trigger name, got %q and %q: %w", ws, trigger, engine.ErrInvalid)
	}
	if err := noNUL("workspace", ws); err != nil {
		return err
	}
	return noNUL("trigger name", trigger)
}
