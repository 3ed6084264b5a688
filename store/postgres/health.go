package postgres

import (
	"context"
	"fmt"
	"time"
)

// CheckWrite proves the database accepts a write: a one-row transaction,
// committed as every other, overwriting the time of the last check.
func (db *DB) CheckWrite(ctx context.Context) error {
	_, err := db.pool.Exec(ctx, `INSERT INTO health_checks (id, checked_ns) VALUES (true, $1)
		ON CONFLICT (id) DO UPDATE SET checked_ns = excluded.checked_ns`, time.Now().UnixNano())
	if err != nil {
		if connectionLost(err) {
			db.pool.Reset()
		}
		return fmt.Errorf("database refuses writes: %w", err)
	}
	return nil
}
