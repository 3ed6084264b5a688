package postgres

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/audit"
)

var _ audit.Store = (*DB)(nil)

// SetAuditKey sets the chain's key; call it before the store is used. A
// store without one records no audit entries.
func (db *DB) SetAuditKey(k audit.Key) { db.auditKey = k }

// lockHead locks the chain's one row until the transaction ends: whoever
// appends, engine batch or account change, waits for the appender before
// it, so two transactions never chain from the same head.
const lockHead = `SELECT head_seq, head_mac FROM audit_chain WHERE id FOR UPDATE`

const insertAudit = `INSERT INTO audit_entries (seq, at_ns, actor_id, actor_email, actor_key, action, target, mac, rec)
SELECT * FROM unnest($1::int8[], $2::int8[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bytea[], $9::bytea[])`

// auditColumns are the columns an entry is read back from, in auditRow's
// order.
const auditColumns = `seq, at_ns, actor_id, actor_email, actor_key, action, target, mac, rec`

// auditRow is an entry as its row keeps it: the fields the API's filters
// use in columns, the MAC in its 32 bytes, and in rec the rest alone, in
// the stores' compact encoding (audit.MarshalStored with those fields
// zeroed), so no field is kept twice. A MAC that is not 32 bytes of hex
// (a damaged import) stays in rec as it was, mac NULL; a row written
// before mac existed has it NULL and everything in rec.
type auditRow struct {
	seq, at                        int64
	id, email, key, action, target string
	mac, rec                       []byte
}

func toAuditRow(e *audit.Entry) (auditRow, error) {
	r := auditRow{seq: e.Seq, at: audit.Truncate(e.At).UnixNano(), id: e.Actor.ID, email: e.Actor.Email, key: e.Actor.Key,
		action: e.Action, target: e.Target}
	rest := audit.Entry{At: time.UnixMicro(0), Source: e.Source, Outcome: e.Outcome, Reason: e.Reason,
		ClientAddress: e.ClientAddress, Dropped: e.Dropped}
	if raw, err := hex.DecodeString(e.MAC); err == nil && len(raw) == 32 && hex.EncodeToString(raw) == e.MAC {
		r.mac = raw
	} else {
		rest.MAC = e.MAC
	}
	v, err := audit.MarshalStored(&rest)
	if err != nil {
		return r, fmt.Errorf("encode audit entry: %w", err)
	}
	r.rec = v
	return r, nil
}

func (r *auditRow) scan(row pgx.Row) error {
	return row.Scan(&r.seq, &r.at, &r.id, &r.email, &r.key, &r.action, &r.target, &r.mac, &r.rec)
}

func (r *auditRow) entry() (audit.Entry, error) {
	e, err := audit.UnmarshalStored(r.rec)
	if err != nil {
		return e, err
	}
	e.Seq, e.At = r.seq, time.Unix(0, r.at).UTC()
	e.Actor = audit.Actor{ID: r.id, Email: r.email, Key: r.key}
	e.Action, e.Target = r.action, r.target
	if r.mac != nil {
		e.MAC = hex.EncodeToString(r.mac)
	}
	return e, nil
}

const updateHead = `UPDATE audit_chain SET head_seq = $1, head_mac = $2 WHERE id`

// auditWrites signs entries after head and returns the statements that
// write them and the new head.
func auditWrites(key audit.Key, head audit.Head, in []audit.Entry) (*writes, error) {
	n := len(in)
	var (
		seq, at                            = make([]int64, n), make([]int64, n)
		id, email, keyName, action, target = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		mac, rec                           = make([][]byte, n), make([][]byte, n)
	)
	for i := range in {
		e := in[i]
		head = audit.Append(key, head, &e)
		r, err := toAuditRow(&e)
		if err != nil {
			return nil, err
		}
		seq[i], at[i], mac[i], rec[i] = r.seq, r.at, r.mac, r.rec
		id[i], email[i], keyName[i], action[i], target[i] = r.id, r.email, r.key, r.action, r.target
	}
	w := &writes{}
	w.Queue(insertAudit, seq, at, id, email, keyName, action, target, mac, rec)
	w.Queue(updateHead, head.Seq, head.MAC)
	return w, nil
}

// appendAudit appends entries in tx, which it locks the head row in.
func (db *DB) appendAudit(ctx context.Context, tx pgx.Tx, entries []audit.Entry) error {
	if len(entries) == 0 || len(db.auditKey) == 0 {
		return nil
	}
	var head audit.Head
	if err := tx.QueryRow(ctx, lockHead).Scan(&head.Seq, &head.MAC); err != nil {
		return fmt.Errorf("lock the audit chain: %w", err)
	}
	w, err := auditWrites(db.auditKey, head, entries)
	if err != nil {
		return err
	}
	for i, sql := range w.sql {
		if _, err := tx.Exec(ctx, sql, w.args[i]...); err != nil {
			return fmt.Errorf("append audit entries: %w", err)
		}
	}
	return nil
}

// ctxEntries is the entry ctx carries (audit.WithEntry), if any, and the
// store can sign it.
func (db *DB) ctxEntries(ctx context.Context) []audit.Entry {
	if len(db.auditKey) == 0 {
		return nil
	}
	if e, ok := audit.FromContext(ctx); ok {
		return []audit.Entry{e}
	}
	return nil
}

// audited runs a lone account write, fn, with the audit entry ctx
// carries: without one, on the fenced pool as before; with one, in a
// transaction (fence first) that appends the entry after fn, so the
// change and its entry commit together or not at all.
func (db *DB) audited(ctx context.Context, fn func(q querier) error) error {
	entries := db.ctxEntries(ctx)
	if entries == nil {
		return fn(db.writer())
	}
	return pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if err := db.fenceTx(ctx, tx); err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			return err
		}
		return db.appendAudit(ctx, tx, entries)
	})
}

// sendAudited runs a batch that carries audit entries: the pipelined
// statements cannot chain entries whose MACs need the head they lock, so
// this one is an explicit transaction: the fence, the head locked and
// read, then the records and the signed entries in one pipelined batch,
// and the commit.
func (db *DB) sendAudited(ctx context.Context, w *writes, entries []audit.Entry) error {
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if err := db.fenceTx(ctx, tx); err != nil {
			return err
		}
		var head audit.Head
		if err := tx.QueryRow(ctx, lockHead).Scan(&head.Seq, &head.MAC); err != nil {
			return fmt.Errorf("lock the audit chain: %w", err)
		}
		aw, err := auditWrites(db.auditKey, head, entries)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		for _, ws := range []*writes{w, aw} {
			for i, sql := range ws.sql {
				b.Queue(sql, ws.args[i]...)
			}
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil && connectionLost(err) {
		db.pool.Reset()
	}
	return fenceError(err)
}

// AppendAudit writes entries that record no change of their own.
func (db *DB) AppendAudit(ctx context.Context, entries []audit.Entry) error {
	if len(entries) == 0 || len(db.auditKey) == 0 {
		return ctx.Err()
	}
	if err := db.sendAudited(ctx, &writes{}, entries); err != nil {
		return fmt.Errorf("append audit entries: %w", err)
	}
	return nil
}

// AuditHeads returns the chain's anchor and head.
func (db *DB) AuditHeads(ctx context.Context) (anchor, head audit.Head, err error) {
	err = db.pool.QueryRow(ctx, `SELECT anchor_seq, anchor_mac, head_seq, head_mac FROM audit_chain WHERE id`).
		Scan(&anchor.Seq, &anchor.MAC, &head.Seq, &head.MAC)
	if err != nil {
		err = fmt.Errorf("read the audit chain's head: %w", err)
	}
	return anchor, head, err
}

// AuditEntries returns entries oldest first after f.After that pass f,
// at most f.Limit (all when Limit <= 0).
func (db *DB) AuditEntries(ctx context.Context, f audit.Filter) ([]audit.Entry, error) {
	var since, until int64
	if !f.Since.IsZero() {
		since = f.Since.UnixNano()
	}
	if !f.Until.IsZero() {
		until = f.Until.UnixNano()
	}
	var limit *int
	if f.Limit > 0 {
		limit = &f.Limit
	}
	rows, err := db.pool.Query(ctx, `SELECT `+auditColumns+` FROM audit_entries
		WHERE seq > $1
		AND ($2 = '' OR actor_id = $2 OR actor_email = $2 OR actor_key = $2)
		AND ($3 = '' OR action = $3 OR (right($3, 1) = '.' AND starts_with(action, $3)))
		AND ($4 = '' OR target = $4)
		AND ($5::int8 = 0 OR at_ns >= $5) AND ($6::int8 = 0 OR at_ns < $6)
		ORDER BY seq LIMIT $7`,
		f.After, noNULs(f.Actor), noNULs(f.Action), noNULs(f.Target), since, until, limit)
	if err != nil {
		return nil, fmt.Errorf("read audit entries: %w", err)
	}
	defer rows.Close()
	var out []audit.Entry
	for rows.Next() {
		var r auditRow
		if err := r.scan(rows); err != nil {
			return nil, fmt.Errorf("read audit entries: %w", err)
		}
		e, err := r.entry()
		if err != nil {
			return nil, fmt.Errorf("decode audit entry: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read audit entries: %w", err)
	}
	return out, nil
}

// noNULs: a filter PostgreSQL's text cannot hold matches nothing stored
// (entries are cleaned of NULs), so it becomes one that matches nothing.
func noNULs(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return "\uFFFD\uFFFD"
		}
	}
	return s
}

// TrimAudit drops entries older than before, from the front only, and
// keeps the last one dropped as the anchor.
func (db *DB) TrimAudit(ctx context.Context, before time.Time) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		n = 0
		if err := db.fenceTx(ctx, tx); err != nil {
			return err
		}
		var head audit.Head
		if err := tx.QueryRow(ctx, lockHead).Scan(&head.Seq, &head.MAC); err != nil {
			return err
		}
		// The front: every entry up to the first one not older than before.
		var last int64
		err := tx.QueryRow(ctx, `SELECT coalesce(min(seq), $2) - 1 FROM audit_entries WHERE at_ns >= $1`,
			before.UnixNano(), head.Seq+1).Scan(&last)
		if err != nil {
			return err
		}
		var anchor audit.Head
		var r auditRow
		err = r.scan(tx.QueryRow(ctx, `SELECT `+auditColumns+` FROM audit_entries WHERE seq = $1`, last))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // nothing to drop
		}
		if err != nil {
			return err
		}
		e, err := r.entry()
		if err != nil {
			return fmt.Errorf("decode audit entry: %w", err)
		}
		anchor = e.Head()
		tag, err := tx.Exec(ctx, `DELETE FROM audit_entries WHERE seq <= $1`, last)
		if err != nil {
			return err
		}
		n = int(tag.RowsAffected())
		_, err = tx.Exec(ctx, `UPDATE audit_chain SET anchor_seq = $1, anchor_mac = $2 WHERE id`, anchor.Seq, anchor.MAC)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("trim audit entries: %w", fenceError(err))
	}
	return n, nil
}

// RestoreAudit writes entries exactly as they are (an import).
func (db *DB) RestoreAudit(ctx context.Context, anchor audit.Head, entries []audit.Entry) error {
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if err := db.fenceTx(ctx, tx); err != nil {
			return err
		}
		var head audit.Head
		if err := tx.QueryRow(ctx, lockHead).Scan(&head.Seq, &head.MAC); err != nil {
			return err
		}
		if head.Seq == 0 {
			if _, err := tx.Exec(ctx, `UPDATE audit_chain SET anchor_seq = $1, anchor_mac = $2 WHERE id`, anchor.Seq, anchor.MAC); err != nil {
				return err
			}
			head = anchor
		}
		b := &pgx.Batch{}
		for i := range entries {
			e := &entries[i]
			if e.Seq != head.Seq+1 {
				return fmt.Errorf("audit entry %d does not follow entry %d", e.Seq, head.Seq)
			}
			r, err := toAuditRow(e)
			if err != nil {
				return err
			}
			b.Queue(`INSERT INTO audit_entries (`+auditColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
				r.seq, r.at, r.id, r.email, r.key, r.action, r.target, r.mac, r.rec)
			head = e.Head()
		}
		b.Queue(updateHead, head.Seq, head.MAC)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("restore audit entries: %w", fenceError(err))
	}
	return nil
}
