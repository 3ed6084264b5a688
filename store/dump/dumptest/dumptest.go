// Package dumptest checks that a dump carries a server's whole state from
// one store to another and back: it fills a store with one of every kind
// of record, exports it, imports it into the other, exports that, and
// compares the two dumps line by line.
package dumptest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/audit"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store"
	"github.com/appliance-sh/appliance/store/dump"
)

// Linker is a store that can link an OIDC identity (both can).
type Linker interface {
	ProvisionLinkedUser(ctx context.Context, link accounts.AuthLink, email string, newUser *accounts.User, rule accounts.LinkRule) (*accounts.User, error)
}

// t0 is the records' epoch; times carry microseconds, as both stores keep.
var t0 = time.Date(2026, 5, 4, 10, 11, 12, 345678000, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

// jobID is a UUID-shaped id (event marks' keys rely on the length).
func jobID(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

// keyEvery jobs, one carries the Idempotency-Key of the request that made
// it (jobKey).
const keyEvery = 50

// jobCount is how many jobs Populate makes.
const jobCount = 450

func jobKey(n int) string { return fmt.Sprintf("key-%d", n) }

// Populate fills src with records of every kind a dump carries: jobs of
// each status with steps (claimed, retried, looped), a worker, users with
// keys and an OIDC link, trigger fires, event marks and counts, logs of
// two streams, and a revision snapshot.
func Populate(t *testing.T, src dump.Sources) {
	t.Helper()
	ctx := context.Background()
	s := src.Store
	if k, ok := s.(interface{ SetAuditKey(audit.Key) }); ok {
		k.SetAuditKey(AuditKey)
	}
	admin := &accounts.User{ID: "u-admin", Email: "admin@example.com", PasswordHash: "$argon2id$v=19$m=65536,t=1,p=2$c2FsdA$aGFzaA",
		IsAdmin: true, Groups: []string{"ops"}, CreatedAt: at(0)}
	name := "Dev"
	dev := &accounts.User{ID: "u-dev", Email: "dev@example.com", Name: &name, Groups: []string{"dev", "ops"}, CreatedAt: at(1)}
	for _, u := range []*accounts.User{admin, dev} {
		entry := audit.Entry{At: u.CreatedAt, Actor: audit.Actor{ID: "root"}, Source: audit.SourceUser,
			Action: audit.UserCreate, Target: "user/" + u.ID, Outcome: audit.OK, ClientAddress: "203.0.113.9"}
		if err := s.CreateUser(audit.WithEntry(ctx, entry), u); err != nil {
			t.Fatalf("create user: %v", err)
		}
	}
	if l, ok := s.(Linker); ok {
		link := accounts.AuthLink{Provider: "corp", Subject: "sub-123", CreatedAt: at(2)}
		if _, err := l.ProvisionLinkedUser(ctx, link, dev.Email, nil, accounts.LinkRule{EmailVerified: true}); err != nil {
			t.Fatalf("link: %v", err)
		}
	}
	exp := at(86400 * 30)
	used := at(5)
	for _, k := range []*accounts.APIKey{
		{Hash: strings.Repeat("a", 64), Prefix: "apk_aaaa", Name: "ci", UserID: admin.ID, CreatedAt: at(3), ExpiresAt: &exp, LastUsedAt: &used},
		{Hash: strings.Repeat("b", 64), Prefix: "apk_bbbb", Name: "laptop", UserID: dev.ID, CreatedAt: at(4)},
	} {
		if err := s.CreateAPIKey(ctx, k); err != nil {
			t.Fatalf("create key: %v", err)
		}
	}

	wid := "w-1"
	w := &engine.Worker{ID: wid, Name: "box", Tags: []string{"linux", "docker"}, Status: engine.WorkerActive,
		LastSeen: at(10), RegisteredAt: at(9), SecretSHA256: strings.Repeat("c", 64)}
	var b engine.Batch
	b.Workers = append(b.Workers, w)
	statuses := []string{engine.JobCompleted, engine.JobFailed, engine.JobRunning, engine.JobPending, engine.JobCancelled, engine.JobSkipped}
	for i := 0; i < jobCount; i++ { // more than one export page
		id := jobID(i)
		st := statuses[i%len(statuses)]
		j := &engine.Job{ID: id, Workspace: []string{"main", "ops"}[i%2], TaskName: fmt.Sprintf("task-%d", i%7), AccessPath: "dir/task",
			Mode: "distributed", Status: st, SourceType: []string{engine.SourceAPI, engine.SourceTrigger, engine.SourceWebhook}[i%3],
			Revision: "r1", Input: map[string]any{"n": float64(i), "s": "x\ny", "nested": map[string]any{"a": []any{1.0, "b"}}},
			CreatedAt: at(100 + i)}
		if i%keyEvery == 0 {
			j.IdempotencyKey = jobKey(i)
		}
		if st != engine.JobPending {
			started := at(101 + i)
			j.StartedAt = &started
		}
		b.Jobs = append(b.Jobs, j)
		for k := 0; k < 3; k++ {
			step := &engine.Step{JobID: id, Name: fmt.Sprintf("s%d", k), FlowStep: fmt.Sprintf("s%d", k), Index: -1, Seq: k,
				ActionName: "act", ActionType: "script", Runner: "local", Status: engine.StepCompleted,
				Input: map[string]any{"k": k}, Attempt: 1 + k%2}
			if k == 1 {
				step.WorkerID = &wid
			}
			b.Steps = append(b.Steps, step)
		}
	}
	b.Fires = []engine.TriggerFire{{Workspace: "main", Trigger: "nightly", At: at(50)}, {Workspace: "ops", Trigger: "hourly", At: at(51)}}
	b.EventMarks = []engine.EventMark{{Source: "main/queue", JobID: jobID(2), Step: "consume", Run: "run-1", Seq: 42, Consumed: 7}}
	for i := range 1200 { // more than one page of the trail
		b.Audit = append(b.Audit, audit.Entry{At: at(100 + i), Actor: audit.Actor{ID: admin.ID, Email: admin.Email, Key: "ci"},
			Source: audit.SourceAPIKey, Action: audit.JobExecute, Target: "job/" + jobID(i%450), Outcome: audit.OK, ClientAddress: "198.51.100.1"})
	}
	if err := s.Commit(ctx, &b); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// Retention drops the two users' entries: the export carries the anchor.
	if tr, ok := s.(interface {
		TrimAudit(context.Context, time.Time) (int, error)
	}); ok {
		if n, err := tr.TrimAudit(ctx, at(100)); err != nil || n != 2 {
			t.Fatalf("trim the audit trail: %d, %v", n, err)
		}
	}
	if src.Logs != nil {
		for i := 0; i < 5; i++ {
			var lines []engine.LogLine
			for n := 0; n < 1500; n++ { // more than one log record
				lines = append(lines, engine.LogLine{TS: at(200 + n), Stream: []string{"stdout", "stderr"}[n%2],
					Step: fmt.Sprintf("s%d", n%3), Line: fmt.Sprintf("line %d of job %d \u00e9 \"quoted\"", n, i)})
			}
			if err := src.Logs.Append(jobID(i), lines); err != nil {
				t.Fatalf("append log: %v", err)
			}
		}
		l := src.Logs.(store.LogBackend)
		for _, p := range pushes {
			if err := l.AppendRun(p.job, p.step, p.run, p.lines()); err != nil {
				t.Fatalf("push: %v", err)
			}
			if p.ended {
				if err := l.EndStep(p.job, p.step); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if src.Snapshots != nil {
		if err := src.Snapshots.Put("main", "r1", bytes.NewReader([]byte("\x1f\x8b pretend tarball \x00\xff"))); err != nil {
			t.Fatalf("put snapshot: %v", err)
		}
	}
}

// push is a step run's numbered lines, as a remote worker pushes them:
// a dump carries each step's last run mark.
type push struct {
	job, step, run string
	n              int64
	ended          bool // the server ended the run; it may still push
}

var pushes = []push{
	{jobID(0), "s0", "run-a", 3, false},
	{jobID(1), "remote", "run-b", 2, true},
	{jobID(1), "other", "run-c", 1, false},
}

func (p push) lines() []engine.LogLine {
	var out []engine.LogLine
	for seq := int64(1); seq <= p.n; seq++ {
		out = append(out, engine.LogLine{TS: at(3000 + int(seq)), Stream: "stdout", Step: p.step, Line: fmt.Sprintf("pushed %d", seq), Seq: seq})
	}
	return out
}

// Bbolt opens a bbolt server's state in a new folder: its store, log
// files and revision snapshots.
func Bbolt(t *testing.T) dump.Sources {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "appliance.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	logs, err := store.OpenLogs(filepath.Join(dir, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logs.Close() })
	snaps, err := store.OpenSnapshots(filepath.Join(dir, "snapshots"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return dump.Sources{Store: db, Logs: logs, Snapshots: snaps}
}

// Export dumps src; the export time is fixed so two dumps compare.
func Export(t *testing.T, src dump.Sources) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := dump.Export(context.Background(), src, &buf, t0); err != nil {
		t.Fatalf("export: %v", err)
	}
	return buf.Bytes()
}

// RoundTrip imports from's dump into to (empty) and checks that to's dump
// is the same, record for record; it returns the dump.
func RoundTrip(t *testing.T, from, to dump.Sources) []byte {
	t.Helper()
	a := Export(t, from)
	if _, err := dump.Import(context.Background(), to, bytes.NewReader(a), t.TempDir()); err != nil {
		t.Fatalf("import: %v", err)
	}
	Same(t, a, Export(t, to))
	SameKeys(t, to)
	// A worker whose answer was lost before the move repeats its push to
	// the new server: it adds nothing.
	l := to.Logs.(store.LogBackend)
	for _, p := range pushes {
		if err := l.AppendRun(p.job, p.step, p.run, p.lines()); err != nil {
			t.Fatalf("repeated push: %v", err)
		}
	}
	Same(t, a, Export(t, to))
	// The trail came over verbatim: it still verifies under its key.
	if st, ok := to.Store.(audit.Store); ok {
		if v, broken, err := audit.VerifyStore(context.Background(), AuditKey, st, nil); err != nil || broken != nil || v.Count() == 0 {
			t.Fatalf("the imported audit trail: %v, %v", broken, err)
		}
	}
	return a
}

// SameKeys checks that the store's Idempotency-Key index (bbolt's
// idx_keys, PostgreSQL's job_keys) finds each job Populate gave a key:
// the dump carries the keys in the job records, and the import's commits
// rebuild the index from them, so a submission retried after a migration
// still finds its job.
func SameKeys(t *testing.T, dst dump.Sources) {
	t.Helper()
	kj, ok := dst.Store.(engine.KeyedJobs)
	if !ok {
		t.Fatalf("%T keeps no Idempotency-Key index", dst.Store)
	}
	for i := 0; i < jobCount; i += keyEvery {
		id, err := kj.JobByIdempotencyKey(context.Background(), jobKey(i))
		if err != nil || id != jobID(i) {
			t.Fatalf("Idempotency-Key %q finds job %q (%v), want %s", jobKey(i), id, err, jobID(i))
		}
	}
}

// AuditKey signs the trail Populate writes.
var AuditKey = audit.Key("dumptest audit key 0123456789")

// Same compares two dumps line by line, naming the first difference.
func Same(t *testing.T, want, got []byte) {
	t.Helper()
	w, g := lines(want), lines(got)
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			t.Fatalf("the dumps differ at line %d of %d/%d:\nwant %s\n got %s", i+1, len(w), len(g), clip(wl), clip(gl))
		}
	}
}

// SameExceptTime compares two dumps but for their headers' export times.
func SameExceptTime(t *testing.T, want, got []byte) {
	t.Helper()
	w, g := lines(want), lines(got)
	if len(w) == 0 || len(g) == 0 {
		t.Fatalf("an empty dump: %d and %d lines", len(w), len(g))
	}
	Same(t, []byte(strings.Join(w[1:], "\n")), []byte(strings.Join(g[1:], "\n")))
}

func lines(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func clip(s string) string {
	if len(s) > 600 {
		return s[:600] + "..."
	}
	return s
}
