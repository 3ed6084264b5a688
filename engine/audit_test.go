package engine_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/appliance-sh/appliance/audit"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

func actions(es []audit.Entry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Action+" "+e.Target)
	}
	return out
}

// Each command that carries an audit entry (audit.WithEntry) puts it in
// its own batch, its action and target filled in by the engine; a command
// refused writes none; a trigger is its own actor; jobs the engine makes
// itself (hooks, children) carry none.
func TestCommandsRecordTheirEntryInTheirBatch(t *testing.T) {
	f := enginetest.New(t, approvalYAML)
	who := audit.Entry{Actor: audit.Actor{ID: "u1", Email: "ann@example.com"}, Source: audit.SourceUser, ClientAddress: "192.0.2.4"}
	ctx := audit.WithEntry(t.Context(), who)

	j, err := f.Engine.CreateJob(ctx, engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "release", SourceType: engine.SourceAPI})
	if err != nil {
		t.Fatal(err)
	}
	f.WaitStep(j.ID, "ask", engine.StepWaiting)
	if err := f.Engine.Approve(ctx, j.ID, "ask", engine.Approval{Approved: false, By: "ann@example.com", RejectionReason: "not today"}); err != nil {
		t.Fatal(err)
	}
	f.WaitStatus(j.ID, engine.JobFailed)
	if err := f.Engine.CancelJob(ctx, j.ID); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("cancel of an ended job: %v", err)
	}
	re, err := f.Engine.CreateJob(ctx, engine.CreateJob{SourceType: engine.SourceAPI, Rerun: &engine.Rerun{JobID: j.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Engine.CancelJob(ctx, re.ID); err != nil {
		t.Fatal(err)
	}
	src := "main/nightly"
	tj, err := f.Engine.CreateTriggered(t.Context(), engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "release",
		SourceType: engine.SourceTrigger, SourceID: &src}, "")
	if err != nil {
		t.Fatal(err)
	}
	f.Execute("release", nil) // no entry in its context: none recorded

	got := f.Store.Audit()
	want := []string{
		audit.JobExecute + " job/" + j.ID,
		audit.ApprovalDeny + " job/" + j.ID + "/ask",
		audit.JobRerun + " job/" + re.ID,
		audit.JobCancel + " job/" + re.ID,
		audit.JobExecute + " job/" + tj.ID,
	}
	if !slices.Equal(actions(got), want) {
		t.Fatalf("entries %q, want %q", actions(got), want)
	}
	for _, e := range got[:4] {
		if e.Actor != who.Actor || e.ClientAddress != who.ClientAddress || e.Outcome != audit.OK || e.At.IsZero() {
			t.Errorf("entry %+v: want ann's, ok, timed", e)
		}
	}
	if e := got[4]; e.Source != audit.SourceTrigger || e.Actor.ID != src {
		t.Errorf("the trigger's entry %+v", e)
	}
}

// Entries that record no change (denied requests) ride the next commit
// even when nothing else happens: the queue wakes an idle loop.
func TestQueuedEntriesReachAnIdleEngineCommit(t *testing.T) {
	q := audit.NewQueue(0)
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, approvalYAML), enginetest.Options{Audit: q})
	f.Settle()
	for i := range 3 {
		q.Push(audit.Entry{Action: audit.RequestDenied, Target: "GET /api/users", Outcome: audit.Denied, Reason: string(rune('a' + i))})
	}
	f.Eventually(func() bool { return len(f.Store.Audit()) == 3 }, func() string { return "the queued entries were not committed" })
	if q.Len() != 0 {
		t.Fatalf("%d entries still queued", q.Len())
	}
}

// An entry still queued when the engine stops (its wake-up lost: here
// switched off, as when it finds the command channel full or the stop
// wins the race) is written in a last commit, not lost.
func TestQueuedEntriesAreCommittedAtShutdown(t *testing.T) {
	q := audit.NewQueue(0)
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, approvalYAML), enginetest.Options{Audit: q})
	f.Settle()
	q.OnPush(func() {})
	q.Push(audit.Entry{Action: audit.RequestDenied, Target: "GET /api/users", Outcome: audit.Denied, Reason: "not an admin"})
	f.Stop()
	got := f.Store.Audit()
	if len(got) != 1 || got[0].Action != audit.RequestDenied || got[0].Reason != "not an admin" {
		t.Fatalf("after the stop: entries %+v, want the denied request's", got)
	}
	if q.Len() != 0 {
		t.Fatalf("%d entries still queued", q.Len())
	}
}

// A command the engine refuses (a cancel of an ended job, a re-run of a
// job still running from its failed steps) records its entry with
// outcome failed and the reason, through the queue; a command without an
// entry in its context records none.
func TestRefusedCommandsRecordAFailedEntry(t *testing.T) {
	q := audit.NewQueue(0)
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, approvalYAML), enginetest.Options{Audit: q})
	who := audit.Entry{Actor: audit.Actor{ID: "u1", Email: "ann@example.com"}, Source: audit.SourceUser, ClientAddress: "192.0.2.4"}
	ctx := audit.WithEntry(t.Context(), who)

	j, err := f.Engine.CreateJob(ctx, engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "release", SourceType: engine.SourceAPI})
	if err != nil {
		t.Fatal(err)
	}
	f.WaitStep(j.ID, "ask", engine.StepWaiting)
	_, rerunErr := f.Engine.CreateJob(ctx, engine.CreateJob{SourceType: engine.SourceAPI, Rerun: &engine.Rerun{JobID: j.ID, FromFailed: true}})
	if !errors.Is(rerunErr, engine.ErrConflict) {
		t.Fatalf("re-run of a waiting job: %v", rerunErr)
	}
	// It rides the next commit, which the queue's wake-up makes at once.
	f.Eventually(func() bool { return len(f.Store.Audit()) == 2 }, func() string { return "the refused re-run's entry was not committed" })
	if err := f.Engine.CancelJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	cancelErr := f.Engine.CancelJob(ctx, j.ID)
	if !errors.Is(cancelErr, engine.ErrConflict) {
		t.Fatalf("cancel of an ended job: %v", cancelErr)
	}
	if err := f.Engine.CancelJob(t.Context(), j.ID); !errors.Is(err, engine.ErrConflict) { // no entry: none recorded
		t.Fatalf("cancel of an ended job: %v", err)
	}
	want := []string{
		audit.JobExecute + " job/" + j.ID,
		audit.JobRerun + " job/" + j.ID,
		audit.JobCancel + " job/" + j.ID,
		audit.JobCancel + " job/" + j.ID,
	}
	f.Eventually(func() bool { return len(f.Store.Audit()) >= len(want) }, func() string { return "the failed commands' entries were not committed" })
	got := f.Store.Audit()
	if !slices.Equal(actions(got), want) {
		t.Fatalf("entries %q, want %q", actions(got), want)
	}
	outcomes := []struct{ outcome, reason string }{{audit.OK, ""}, {audit.Failed, rerunErr.Error()}, {audit.OK, ""}, {audit.Failed, cancelErr.Error()}}
	for i, e := range got {
		if e.Outcome != outcomes[i].outcome || e.Reason != outcomes[i].reason || e.Actor != who.Actor || e.ClientAddress != who.ClientAddress || e.At.IsZero() {
			t.Errorf("entry %d: %+v, want outcome %q, reason %q, ann's", i, e, outcomes[i].outcome, outcomes[i].reason)
		}
	}
}
