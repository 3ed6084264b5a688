package storetest

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/appliance-sh/appliance/audit"
	"github.com/appliance-sh/appliance/engine"
)

// AuditStore is a Store that keeps the audit trail.
type AuditStore interface {
	Store
	audit.Store
	SetAuditKey(audit.Key)
}

var suiteKey = audit.Key("storetest audit chain key!")

func auditEntry(action, target string) audit.Entry {
	return audit.Entry{
		At: at(1), Actor: audit.Actor{ID: "u1", Email: "ann@example.com"}, Source: audit.SourceUser,
		Action: action, Target: target, Outcome: audit.OK, ClientAddress: "192.0.2.1",
	}
}

// auditCommits: a batch's audit entries are written with its records,
// numbered and chained, and a batch refused writes none of them. Racing
// commits (and account changes) append one after the other: the chain
// has one appender at a time.
func auditCommits(t *testing.T, b Backend) {
	st, ok := b.Open(t).(AuditStore)
	if !ok {
		t.Skip("this store keeps no audit trail")
	}
	st.SetAuditKey(suiteKey)
	ctx := context.Background()
	commit(t, st, &engine.Batch{
		Jobs:  []*engine.Job{job("j1", "ops", "build", engine.JobPending, 1)},
		Audit: []audit.Entry{auditEntry(audit.JobExecute, "job/j1"), auditEntry(audit.RequestDenied, "GET /api/users")},
	})
	bad := job("j2", "ops", "build", engine.JobPending, 2)
	bad.Input = map[string]any{"x": math.NaN()}
	if err := st.Commit(ctx, &engine.Batch{Jobs: []*engine.Job{bad}, Audit: []audit.Entry{auditEntry(audit.JobExecute, "job/j2")}}); err == nil {
		t.Fatal("a batch holding a value JSON cannot encode was committed")
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := string(rune('a' + i))
			if err := st.Commit(ctx, &engine.Batch{Jobs: []*engine.Job{job("r"+id, "ops", "build", engine.JobPending, 3+i)},
				Audit: []audit.Entry{auditEntry(audit.JobExecute, "job/r"+id)}}); err != nil {
				t.Error(err)
			}
			if err := st.AppendAudit(ctx, []audit.Entry{auditEntry(audit.SignIn, "user/u1")}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	entries, err := st.AuditEntries(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	anchor, head, err := st.AuditHeads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 10 || head.Seq != 10 || anchor.Seq != 0 {
		t.Fatalf("%d entries, head %d, anchor %d: want 10, 10, 0", len(entries), head.Seq, anchor.Seq)
	}
	if err := audit.Verify(suiteKey, anchor, entries, &head); err != nil {
		t.Fatalf("chain: %v", err)
	}
	for _, e := range entries {
		if e.Target == "job/j2" {
			t.Fatal("the refused batch's entry was written")
		}
	}
	if entries[0].Target != "job/j1" || entries[0].ClientAddress != "192.0.2.1" || !entries[0].At.Equal(at(1)) {
		t.Fatalf("first entry %+v", entries[0])
	}
	// Filters and cursor pages.
	page, err := st.AuditEntries(ctx, audit.Filter{Action: "job.", After: 1, Limit: 2})
	if err != nil || len(page) != 2 || page[0].Seq <= 1 || page[0].Action != audit.JobExecute {
		t.Fatalf("page: %+v, %v", page, err)
	}
	// Retention drops from the front and keeps the last MAC dropped.
	if n, err := st.TrimAudit(ctx, at(1).Add(1)); err != nil || n != 10 {
		t.Fatalf("trim: %d, %v", n, err)
	}
	if err := st.AppendAudit(ctx, []audit.Entry{auditEntry(audit.SignOut, "user/u1")}); err != nil {
		t.Fatal(err)
	}
	anchor, head, _ = st.AuditHeads(ctx)
	rest, _ := st.AuditEntries(ctx, audit.Filter{})
	if anchor != entries[9].Head() || len(rest) != 1 || rest[0].Seq != 11 {
		t.Fatalf("after trim: anchor %+v, %d entries", anchor, len(rest))
	}
	if err := audit.Verify(suiteKey, anchor, rest, &head); err != nil {
		t.Fatalf("chain after trim: %v", err)
	}
}
