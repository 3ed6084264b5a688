package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/audit"
)

// The audit trail: entries by sequence number, and the chain's head and
// anchor. bbolt has one writer at a time, so the chain has one appender:
// whichever transaction writes, engine batch or account change, reads the
// head and writes the next entries before the next one can.
var (
	bucketAudit     = []byte("audit")      // seq (8 bytes, big-endian) -> entry JSON
	bucketAuditMeta = []byte("audit_meta") // "head", "anchor" -> audit.Head JSON
	auditBuckets    = [][]byte{bucketAudit, bucketAuditMeta}
	metaHead        = []byte("head")
	metaAnchor      = []byte("anchor")
)

var _ audit.Store = (*DB)(nil)

// SetAuditKey sets the chain's key; call it before the store is used. A
// store without one records no audit entries (the server always sets
// one, see app's audit key).
func (db *DB) SetAuditKey(k audit.Key) { db.auditKey = k }

func auditKey(seq int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(seq)) }

func getHead(tx *bolt.Tx, name []byte) (audit.Head, error) {
	var h audit.Head
	v := tx.Bucket(bucketAuditMeta).Get(name)
	if v == nil {
		return h, nil
	}
	if err := json.Unmarshal(v, &h); err != nil {
		return h, fmt.Errorf("decode audit %s: %w", name, err)
	}
	return h, nil
}

func putHead(tx *bolt.Tx, name []byte, h audit.Head) error {
	v, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketAuditMeta).Put(name, v)
}

// appendAudit numbers, signs and writes entries after the chain's head,
// in tx. Without a key it writes nothing.
func (db *DB) appendAudit(tx *bolt.Tx, entries []audit.Entry) error {
	if len(entries) == 0 || len(db.auditKey) == 0 {
		return nil
	}
	head, err := getHead(tx, metaHead)
	if err != nil {
		return err
	}
	b := tx.Bucket(bucketAudit)
	for i := range entries {
		e := entries[i]
		head = audit.Append(db.auditKey, head, &e)
		v, err := audit.MarshalStored(&e)
		if err != nil {
			return fmt.Errorf("encode audit entry: %w", err)
		}
		if err := b.Put(auditKey(e.Seq), v); err != nil {
			return fmt.Errorf("put audit entry: %w", err)
		}
	}
	return putHead(tx, metaHead, head)
}

// update runs fn in a write transaction with the audit entry ctx carries
// (audit.WithEntry), if any: the account change and its entry commit
// together or not at all.
func (db *DB) update(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return db.bolt.Update(func(tx *bolt.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if e, ok := audit.FromContext(ctx); ok {
			return db.appendAudit(tx, []audit.Entry{e})
		}
		return nil
	})
}

// AppendAudit writes entries on their own (a config reload, the dropped
// requests of a server whose loop is not running).
func (db *DB) AppendAudit(ctx context.Context, entries []audit.Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := db.bolt.Update(func(tx *bolt.Tx) error { return db.appendAudit(tx, entries) }); err != nil {
		return fmt.Errorf("append audit entries: %w", err)
	}
	return nil
}

// AuditHeads returns the chain's anchor (where it starts: zero, or the
// last entry retention dropped) and its head (the newest entry).
func (db *DB) AuditHeads(ctx context.Context) (anchor, head audit.Head, err error) {
	err = db.view(ctx, func(tx *bolt.Tx) error {
		if anchor, err = getHead(tx, metaAnchor); err != nil {
			return err
		}
		head, err = getHead(tx, metaHead)
		return err
	})
	return anchor, head, err
}

// AuditEntries returns entries oldest first after f.After that pass f,
// at most f.Limit (every one when Limit <= 0).
func (db *DB) AuditEntries(ctx context.Context, f audit.Filter) ([]audit.Entry, error) {
	var out []audit.Entry
	err := db.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketAudit).Cursor()
		for k, v := c.Seek(auditKey(f.After + 1)); k != nil; k, v = c.Next() {
			e, err := audit.UnmarshalStored(v)
			if err != nil {
				return fmt.Errorf("decode audit entry %d: %w", binary.BigEndian.Uint64(k), err)
			}
			if !f.Match(&e) {
				continue
			}
			out = append(out, e)
			if f.Limit > 0 && len(out) == f.Limit {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read audit entries: %w", err)
	}
	return out, nil
}

// TrimAudit drops the entries older than before, from the front only,
// and keeps the last one dropped as the chain's anchor, so what is left
// still checks.
func (db *DB) TrimAudit(ctx context.Context, before time.Time) (int, error) {
	n := 0
	err := db.update(ctx, func(tx *bolt.Tx) error {
		var last *audit.Head
		c := tx.Bucket(bucketAudit).Cursor()
		for k, v := c.First(); k != nil; k, v = c.First() {
			e, err := audit.UnmarshalStored(v)
			if err != nil {
				return fmt.Errorf("decode audit entry: %w", err)
			}
			if !e.At.Before(before) {
				break
			}
			h := e.Head()
			last = &h
			if err := c.Delete(); err != nil {
				return err
			}
			n++
		}
		if last == nil {
			return nil
		}
		return putHead(tx, metaAnchor, *last)
	})
	if err != nil {
		return 0, fmt.Errorf("trim audit entries: %w", err)
	}
	return n, nil
}

// RestoreAudit writes entries exactly as they are (an import): their
// numbers and MACs are the chain's, which the store must not re-sign.
func (db *DB) RestoreAudit(ctx context.Context, anchor audit.Head, entries []audit.Entry) error {
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		head, err := getHead(tx, metaHead)
		if err != nil {
			return err
		}
		if head.Seq == 0 {
			if err := putHead(tx, metaAnchor, anchor); err != nil {
				return err
			}
			head = anchor
		}
		b := tx.Bucket(bucketAudit)
		for i := range entries {
			e := &entries[i]
			if e.Seq != head.Seq+1 {
				return fmt.Errorf("audit entry %d does not follow entry %d", e.Seq, head.Seq)
			}
			v, err := audit.MarshalStored(e)
			if err != nil {
				return err
			}
			if err := b.Put(auditKey(e.Seq), v); err != nil {
				return err
			}
			head = e.Head()
		}
		return putHead(tx, metaHead, head)
	})
	if err != nil {
		return fmt.Errorf("restore audit entries: %w", err)
	}
	return nil
}
