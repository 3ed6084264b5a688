package store

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/audit"
	"github.com/appliance-sh/appliance/engine"
)

var tamperKey = audit.Key("bbolt tamper test key 0123")

// chainOf6 writes six entries and returns the store and the head the
// server would have logged.
func chainOf6(t *testing.T) (*DB, audit.Head) {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "appliance.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetAuditKey(tamperKey)
	ctx := context.Background()
	for i := range 6 {
		e := audit.Entry{At: time.Unix(int64(1000+i), 0), Actor: audit.Actor{ID: "u1", Email: "ann@example.com"},
			Source: audit.SourceUser, Action: audit.JobExecute, Target: "job/" + string(rune('a'+i)), Outcome: audit.OK}
		if err := db.AppendAudit(ctx, []audit.Entry{e}); err != nil {
			t.Fatal(err)
		}
	}
	_, head, err := db.AuditHeads(ctx)
	if err != nil || head.Seq != 6 {
		t.Fatalf("head %+v, %v", head, err)
	}
	return db, head
}

// Editing, deleting, swapping and truncating entries in the bbolt file
// directly is caught, naming the first broken entry.
func TestAuditTamperingInBboltIsCaught(t *testing.T) {
	edit := func(seq int64, change func(*audit.Entry)) func(tx *bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketAudit)
			e, err := audit.UnmarshalStored(b.Get(auditKey(seq)))
			if err != nil {
				return err
			}
			change(&e)
			v, _ := audit.MarshalStored(&e)
			return b.Put(auditKey(seq), v)
		}
	}
	cases := []struct {
		name      string
		tamper    func(tx *bolt.Tx) error
		useLogged bool
		seq       int64
		reason    string
	}{
		{"edited", edit(3, func(e *audit.Entry) { e.Actor.Email = "eve@example.com" }), false, 3, "changed"},
		{"outcome flipped", edit(5, func(e *audit.Entry) { e.Outcome = audit.Denied }), false, 5, "changed"},
		{"deleted", func(tx *bolt.Tx) error { return tx.Bucket(bucketAudit).Delete(auditKey(3)) }, false, 3, "missing"},
		{"swapped", func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketAudit)
			v2, v3 := append([]byte(nil), b.Get(auditKey(2))...), append([]byte(nil), b.Get(auditKey(3))...)
			if err := b.Put(auditKey(2), v3); err != nil {
				return err
			}
			return b.Put(auditKey(3), v2)
		}, false, 2, "missing"},
		{"truncated", func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketAudit)
			if err := b.Delete(auditKey(6)); err != nil {
				return err
			}
			return b.Delete(auditKey(5))
		}, false, 5, "missing at the end"},
		{"truncated and the head row rewound", func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketAudit)
			e4, err := audit.UnmarshalStored(b.Get(auditKey(4)))
			if err != nil {
				return err
			}
			_ = b.Delete(auditKey(6))
			_ = b.Delete(auditKey(5))
			return putHead(tx, metaHead, e4.Head())
		}, true, 5, "missing at the end"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db, logged := chainOf6(t)
			if _, broken, err := audit.VerifyStore(context.Background(), tamperKey, db, &logged); err != nil || broken != nil {
				t.Fatalf("before tampering: %v, %v", broken, err)
			}
			if err := db.bolt.Update(c.tamper); err != nil {
				t.Fatal(err)
			}
			var against *audit.Head
			if c.useLogged {
				against = &logged
			}
			_, broken, err := audit.VerifyStore(context.Background(), tamperKey, db, against)
			var b *audit.Break
			if err != nil || !errors.As(broken, &b) || b.Seq != c.seq || !strings.HasPrefix(b.Reason, c.reason) {
				t.Fatalf("got %v (%v), want entry %d %s", broken, err, c.seq, c.reason)
			}
			if c.useLogged {
				// Against only the store's own head, that truncation passes:
				// which is why the server logs its head.
				if _, broken, _ := audit.VerifyStore(context.Background(), tamperKey, db, nil); broken != nil {
					t.Fatalf("against the rewound head row: %v", broken)
				}
			}
		})
	}
}

// A change and its entry commit together or not at all: when the entry
// cannot be written (here, a damaged chain head read in the same
// transaction), neither the engine's batch nor the account change is.
func TestAChangeAndItsEntryCommitTogether(t *testing.T) {
	db, _ := chainOf6(t)
	ctx := context.Background()
	if err := db.bolt.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketAuditMeta).Put(metaHead, []byte("{damaged")) }); err != nil {
		t.Fatal(err)
	}
	j := &engine.Job{ID: "00000000-0000-4000-8000-000000000001", Workspace: "ops", TaskName: "build", AccessPath: "build", Mode: "distributed",
		Status: engine.JobPending, SourceType: engine.SourceAPI, Revision: "r1", CreatedAt: time.Unix(5000, 0).UTC()}
	entry := audit.Entry{At: time.Unix(5000, 0), Source: audit.SourceUser, Action: audit.JobExecute, Target: "job/" + j.ID, Outcome: audit.OK}
	if err := db.Commit(ctx, &engine.Batch{Jobs: []*engine.Job{j}, Audit: []audit.Entry{entry}}); err == nil {
		t.Fatal("a batch whose entry cannot be written was committed")
	}
	if _, err := db.Job(ctx, j.ID); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the job of the refused batch: %v", err)
	}
	u := &accounts.User{ID: "u9", Email: "nine@example.com", Groups: []string{}, CreatedAt: time.Unix(5000, 0)}
	if err := db.CreateUser(audit.WithEntry(ctx, entry), u); err == nil {
		t.Fatal("a user whose entry cannot be written was created")
	}
	if _, err := db.User(ctx, "u9"); !errors.Is(err, accounts.ErrUserNotFound) {
		t.Fatalf("the user of the refused change: %v", err)
	}
	// Without an entry the same changes go through.
	if err := db.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
}
