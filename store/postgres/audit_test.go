package postgres_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/audit"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

var tamperKey = audit.Key("postgres tamper test key 01")

// Editing, deleting, swapping and truncating entries in the database
// directly, with SQL, is caught, naming the first broken entry; a
// truncation that also rewinds the head row is caught against the head
// the server logged.
func TestAuditTamperingInPostgresIsCaught(t *testing.T) {
	cases := []struct {
		name      string
		sql       []string
		useLogged bool
		seq       int64
		reason    string
	}{
		{"edited", []string{`UPDATE audit_entries SET actor_email = 'eve@example.com' WHERE seq = 3`}, false, 3, "changed"},
		{"edited in its rec", []string{`UPDATE audit_entries SET rec = convert_to(replace(convert_from(rec, 'UTF8'), '"user"', '"system"'), 'UTF8') WHERE seq = 3`}, false, 3, "changed"},
		{"mac replaced", []string{`UPDATE audit_entries a SET mac = b.mac FROM audit_entries b WHERE a.seq = 3 AND b.seq = 4`}, false, 3, "changed"},
		{"deleted", []string{`DELETE FROM audit_entries WHERE seq = 3`}, false, 3, "missing"},
		{"swapped", []string{`UPDATE audit_entries a SET at_ns = b.at_ns, actor_id = b.actor_id, actor_email = b.actor_email, actor_key = b.actor_key,
			action = b.action, target = b.target, mac = b.mac, rec = b.rec FROM audit_entries b WHERE (a.seq, b.seq) IN ((2, 3), (3, 2))`}, false, 2, "changed"},
		{"truncated", []string{`DELETE FROM audit_entries WHERE seq > 4`}, false, 5, "missing at the end"},
		{"truncated and the head row rewound", []string{
			`DELETE FROM audit_entries WHERE seq > 4`,
			`UPDATE audit_chain SET head_seq = 4, head_mac = '$MAC4'`,
		}, true, 5, "missing at the end"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dsn := pgtest.DSN(t)
			db := open(t, dsn)
			db.SetAuditKey(tamperKey)
			ctx := context.Background()
			for i := range 6 {
				e := audit.Entry{At: time.Unix(int64(1000+i), 0), Actor: audit.Actor{ID: "u1", Email: "ann@example.com"},
					Source: audit.SourceUser, Action: audit.JobExecute, Target: "job/" + string(rune('a'+i)), Outcome: audit.OK}
				if err := db.AppendAudit(ctx, []audit.Entry{e}); err != nil {
					t.Fatal(err)
				}
			}
			_, logged, _ := db.AuditHeads(ctx)
			if _, broken, err := audit.VerifyStore(ctx, tamperKey, db, &logged); err != nil || broken != nil || logged.Seq != 6 {
				t.Fatalf("before tampering (head %+v): %v, %v", logged, broken, err)
			}
			es, _ := db.AuditEntries(ctx, audit.Filter{})
			for i := range c.sql {
				c.sql[i] = strings.ReplaceAll(c.sql[i], "$MAC4", es[3].MAC)
			}
			tamper(t, dsn, c.sql...)
			var against *audit.Head
			if c.useLogged {
				against = &logged
			}
			_, broken, err := audit.VerifyStore(ctx, tamperKey, db, against)
			var b *audit.Break
			if err != nil || !errors.As(broken, &b) || b.Seq != c.seq || !strings.HasPrefix(b.Reason, c.reason) {
				t.Fatalf("got %v (%v), want entry %d %s", broken, err, c.seq, c.reason)
			}
		})
	}
}

func tamper(t *testing.T, dsn string, stmts ...string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, s := range stmts {
		if tag, err := conn.Exec(context.Background(), s); err != nil || tag.RowsAffected() == 0 {
			t.Fatalf("%s: %v (%d rows)", s, err, tag.RowsAffected())
		}
	}
}

// A change and its entry commit together or not at all: with the
// entries' insert failing (a trigger raising, as a crash between the two
// statements would end the transaction), neither the engine's batch nor
// the account change is written; once it works, both are.
func TestAChangeAndItsEntryCommitTogether(t *testing.T) {
	dsn := pgtest.DSN(t)
	db := open(t, dsn)
	db.SetAuditKey(tamperKey)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE FUNCTION fail_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TRIGGER fail_audit BEFORE INSERT ON audit_entries FOR EACH ROW EXECUTE FUNCTION fail_audit()`); err != nil {
		t.Fatal(err)
	}
	j := &engine.Job{ID: "00000000-0000-4000-8000-000000000001", Workspace: "ops", TaskName: "build", AccessPath: "build", Mode: "distributed",
		Status: engine.JobPending, SourceType: engine.SourceAPI, Revision: "r1", CreatedAt: time.Unix(5000, 0).UTC()}
	entry := audit.Entry{At: time.Unix(5000, 0), Source: audit.SourceUser, Action: audit.JobExecute, Target: "job/" + j.ID, Outcome: audit.OK}
	batch := &engine.Batch{Jobs: []*engine.Job{j}, Audit: []audit.Entry{entry}}
	if err := db.Commit(ctx, batch); err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("commit with the entries failing: %v", err)
	}
	if _, err := db.Job(ctx, j.ID); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the job of the refused batch: %v", err)
	}
	u := &accounts.User{ID: "u9", Email: "nine@example.com", Groups: []string{}, CreatedAt: time.Unix(5000, 0)}
	key := &accounts.APIKey{Hash: "h9", Prefix: "p9", Name: "ci", UserID: "u9", CreatedAt: time.Unix(5000, 0)}
	if err := db.CreateUser(ctx, u); err != nil { // no entry: not audited, written
		t.Fatal(err)
	}
	if err := db.CreateAPIKey(audit.WithEntry(ctx, entry), key); err == nil {
		t.Fatal("a key whose entry cannot be written was created")
	}
	if _, err := db.SetAdmin(audit.WithEntry(ctx, entry), "u9", true); err == nil {
		t.Fatal("an admin grant whose entry cannot be written was made")
	}
	if got, _ := db.User(ctx, "u9"); got.IsAdmin {
		t.Fatal("the refused admin grant was written")
	}
	if _, err := db.APIKeyByHash(ctx, "h9"); !errors.Is(err, accounts.ErrAPIKeyNotFound) {
		t.Fatalf("the key of the refused change: %v", err)
	}
	if _, err := conn.Exec(ctx, `DROP TRIGGER fail_audit ON audit_entries`); err != nil {
		t.Fatal(err)
	}
	if err := db.Commit(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateAPIKey(audit.WithEntry(ctx, entry), key); err != nil {
		t.Fatal(err)
	}
	es, _ := db.AuditEntries(ctx, audit.Filter{})
	if _, err := db.Job(ctx, j.ID); err != nil || len(es) != 2 {
		t.Fatalf("after the failure is gone: job %v, %d entries", err, len(es))
	}
}

// A row written before 0006 (its MAC in rec, mac NULL, every field in
// rec too) reads back as the same entry, and the chain still verifies.
func TestAuditRowsOfTheFirstSchemaStillRead(t *testing.T) {
	dsn := pgtest.DSN(t)
	db := open(t, dsn)
	db.SetAuditKey(tamperKey)
	ctx := context.Background()
	for i := range 3 {
		e := audit.Entry{At: time.Unix(int64(1000+i), 0), Actor: audit.Actor{ID: "u1", Email: "ann@example.com", Key: "ci"},
			Source: audit.SourceAPIKey, Action: audit.JobCancel, Target: "job/" + string(rune('a'+i)), Outcome: audit.Failed,
			Reason: "job ended", ClientAddress: "192.0.2.1", Dropped: int64(i)}
		if err := db.AppendAudit(ctx, []audit.Entry{e}); err != nil {
			t.Fatal(err)
		}
	}
	before, err := db.AuditEntries(ctx, audit.Filter{})
	if err != nil || len(before) != 3 {
		t.Fatalf("%d entries: %v", len(before), err)
	}
	full, err := audit.MarshalStored(&before[1])
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE audit_entries SET mac = NULL, rec = $1 WHERE seq = 2`, full); err != nil {
		t.Fatal(err)
	}
	after, err := db.AuditEntries(ctx, audit.Filter{})
	if err != nil || len(after) != 3 || after[1] != before[1] {
		t.Fatalf("the old row reads back as %+v (%v), want %+v", after, err, before[1])
	}
	if _, broken, err := audit.VerifyStore(ctx, tamperKey, db, nil); err != nil || broken != nil {
		t.Fatalf("verify: %v, %v", broken, err)
	}
	// The filters read the columns, old rows and new alike.
	for _, f := range []audit.Filter{{Actor: "ci"}, {Actor: "ann@example.com", Action: "job."}, {Target: "job/b"},
		{Since: time.Unix(1001, 0), Until: time.Unix(1002, 0)}, {Action: audit.JobCancel, After: 1, Limit: 1}} {
		var want []audit.Entry
		for _, e := range before {
			if f.Match(&e) && e.Seq > f.After && (f.Limit == 0 || len(want) < f.Limit) {
				want = append(want, e)
			}
		}
		got, err := db.AuditEntries(ctx, f)
		if err != nil || !slices.Equal(got, want) || len(got) == 0 {
			t.Errorf("filter %+v: got %+v (%v), want %+v", f, got, err, want)
		}
	}
}
