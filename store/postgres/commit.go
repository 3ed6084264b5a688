package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/appliance-sh/appliance/audit"
	"github.com/appliance-sh/appliance/engine"
)

var (
	_ engine.Store          = (*DB)(nil)
	_ engine.PreparingStore = (*DB)(nil)
)

// Commit writes the whole batch in one transaction, durable before it
// returns (the server's synchronous_commit decides how).
func (db *DB) Commit(ctx context.Context, b *engine.Batch) error {
	write, err := db.PrepareCommit(b)
	if err != nil {
		return err
	}
	return write(ctx)
}

// PrepareCommit validates and encodes the batch on the caller's goroutine
// (the engine's loop); the write it returns sends it as one pipelined
// pgx.Batch, which PostgreSQL runs as one implicit transaction: one round
// trip for the whole group commit, whatever its size, and nothing of it
// applied unless all of it is. Each kind of record is one statement over
// arrays (unnest), so 10,000 steps are one INSERT, not 10,000.
//
// Records are sorted by key, and a record the batch holds twice is
// written once, as it was last: two commits racing on the same records
// lock them in the same order, so one waits for the other rather than
// deadlocking, and ON CONFLICT never meets one row twice.
func (db *DB) PrepareCommit(b *engine.Batch) (func(context.Context) error, error) {
	if b == nil {
		return func(context.Context) error { return nil }, nil
	}
	batch := &writes{}
	if err := queueJobs(batch, b.Jobs); err != nil {
		return nil, fmt.Errorf("commit batch: %w", err)
	}
	if err := queueJobKeys(batch, b.Jobs); err != nil {
		return nil, fmt.Errorf("commit batch: %w", err)
	}
	if err := queueSteps(batch, b.Steps); err != nil {
		return nil, fmt.Errorf("commit batch: %w", err)
	}
	if err := queueWorkers(batch, b.Workers); err != nil {
		return nil, fmt.Errorf("commit batch: %w", err)
	}
	if err := queueFires(batch, b.Fires); err != nil {
		return nil, fmt.Errorf("commit batch: %w", err)
	}
	queueEventMarks(batch, b.EventMarks)
	var entries []audit.Entry
	if len(db.auditKey) > 0 {
		entries = slices.Clone(b.Audit)
	}
	return func(ctx context.Context) error {
		if batch.Len() == 0 && len(entries) == 0 {
			return ctx.Err()
		}
		send := db.send
		if len(entries) > 0 {
			send = func(ctx context.Context, w *writes) error { return db.sendAudited(ctx, w, entries) }
		}
		if err := send(ctx, batch); err != nil {
			// The database away (restarting, say) is a 503 to whoever
			// waits on the commit, not a 500: try again in a moment.
			return fmt.Errorf("commit batch: %w", unavailable(err))
		}
		return nil
	}, nil
}

// send runs a batch as one implicit transaction. A connection found dead
// resets the pool: when the server restarted or the network dropped, the
// other idle connections are dead too, and the next write should not
// fail on each of them in turn. A batch that never reached the server
// (pgconn.SafeToRetry) is sent once more, on a new connection.
//
// A leader's batch begins with the fence (fence.go): the lease row locked
// FOR SHARE and its epoch checked, in the same transaction.
func (db *DB) send(ctx context.Context, w *writes) error {
	epoch, fenced, err := db.fenceEpoch()
	if err != nil {
		return err
	}
	build := func() *pgx.Batch {
		b := &pgx.Batch{}
		if fenced {
			b.Queue(fenceSQL, epoch)
		}
		for i, sql := range w.sql {
			b.Queue(sql, w.args[i]...)
		}
		return b
	}
	err = db.pool.SendBatch(ctx, build()).Close()
	if err != nil && connectionLost(err) {
		db.noteLost()
		db.pool.Reset()
		if pgconn.SafeToRetry(err) {
			err = db.pool.SendBatch(ctx, build()).Close()
		}
	}
	return fenceError(err)
}

// writes are a commit's statements, kept to build a pgx.Batch for each
// attempt (pgx changes a batch's queries as it sends them).
type writes struct {
	sql  []string
	args [][]any
}

func (w *writes) Queue(sql string, args ...any) {
	w.sql, w.args = append(w.sql, sql), append(w.args, args)
}

func (w *writes) Len() int { return len(w.sql) }

// connectionLost says whether err ended the connection rather than the
// statement: the session was terminated, or the socket failed.
func connectionLost(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "57P") || strings.HasPrefix(pe.Code, "08")
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// lastByKey keeps each record's last occurrence, sorted by key.
func lastByKey[T any](recs []*T, key func(*T) string) []*T {
	seen := make(map[string]int, len(recs))
	out := make([]*T, 0, len(recs))
	for _, r := range recs {
		if r == nil {
			continue
		}
		if i, ok := seen[key(r)]; ok {
			out[i] = r
			continue
		}
		seen[key(r)] = len(out)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *T) int { return strings.Compare(key(a), key(b)) })
	return out
}

// noNUL rejects what PostgreSQL's text cannot hold, as bbolt's store
// rejects what its index keys cannot.
func noNUL(what, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%s %q contains a NUL byte: %w", what, s, engine.ErrInvalid)
	}
	return nil
}

func encode(what string, r any) ([]byte, error) {
	v, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", what, err)
	}
	return v, nil
}

const upsertJobs = `INSERT INTO jobs AS j (id, workspace, task_name, access_path, status, source_type, created_ns, active, ended_ns, rec)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int8[], $8::bool[], $9::int8[], $10::bytea[])
ON CONFLICT (id) DO UPDATE SET workspace = excluded.workspace, task_name = excluded.task_name,
	access_path = excluded.access_path, status = excluded.status, source_type = excluded.source_type,
	created_ns = excluded.created_ns, active = excluded.active, ended_ns = excluded.ended_ns, rec = excluded.rec`

func queueJobs(batch *writes, in []*engine.Job) error {
	jobs := lastByKey(in, func(j *engine.Job) string { return j.ID })
	if len(jobs) == 0 {
		return nil
	}
	n := len(jobs)
	var (
		id, ws, task, access, status, source = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		created                              = make([]int64, n)
		active                               = make([]bool, n)
		ended                                = make([]*int64, n)
		rec                                  = make([][]byte, n)
	)
	for i, j := range jobs {
		if err := validateJob(j); err != nil {
			return err
		}
		v, err := encode("job "+j.ID, j)
		if err != nil {
			return err
		}
		id[i], ws[i], task[i], access[i], status[i], source[i] = j.ID, j.Workspace, j.TaskName, j.AccessPath, j.Status, j.SourceType
		created[i], rec[i] = j.CreatedAt.UnixNano(), v
		active[i] = !engine.JobTerminal(j.Status) || j.HooksPending
		if !active[i] {
			end := j.CreatedAt
			if j.CompletedAt != nil {
				end = *j.CompletedAt
			}
			e := end.UnixNano()
			ended[i] = &e
		}
	}
	batch.Queue(upsertJobs, id, ws, task, access, status, source, created, active, ended, rec)
	return nil
}

func validateJob(j *engine.Job) error {
	if j.ID == "" {
		return fmt.Errorf("job without id: %w", engine.ErrInvalid)
	}
	for _, f := range []struct{ what, v string }{
		{"job id", j.ID}, {"workspace", j.Workspace}, {"task name", j.TaskName}, {"access path", j.AccessPath},
		{"status", j.Status}, {"source type", j.SourceType},
	} {
		if err := noNUL(f.what, f.v); err != nil {
			return err
		}
	}
	return nil
}

const upsertSteps = `INSERT INTO steps AS s (job_id, seq, name, status, worker_id, claim_ns, rec)
SELECT * FROM unnest($1::text[], $2::int4[], $3::text[], $4::text[], $5::text[], $6::int8[], $7::bytea[])
ON CONFLICT (job_id, seq, name) DO UPDATE SET status = excluded.status, worker_id = excluded.worker_id,
	claim_ns = excluded.claim_ns, rec = excluded.rec`

func queueSteps(batch *writes, in []*engine.Step) error {
	if len(in) == 0 {
		return nil
	}
	steps := in
	if len(in) > 1 {
		steps = sortedSteps(in)
	}
	n := len(steps)
	var (
		job, name, status = make([]string, n), make([]string, n), make([]string, n)
		seq               = make([]int32, n)
		worker            = make([]*string, n)
		claim             = make([]*int64, n)
		rec               = make([][]byte, n)
	)
	for i, s := range steps {
		if err := validateStep(s); err != nil {
			return err
		}
		v, err := encode("step "+s.JobID+"/"+s.Name, s)
		if err != nil {
			return err
		}
		job[i], seq[i], name[i], status[i], rec[i] = s.JobID, int32(s.Seq), s.Name, s.Status, v
		if s.WorkerID != nil && *s.WorkerID != "" {
			worker[i] = s.WorkerID
			var t int64
			switch {
			case s.ReadyAt != nil:
				t = s.ReadyAt.UnixNano()
			case s.StartedAt != nil:
				t = s.StartedAt.UnixNano()
			}
			claim[i] = &t
		}
	}
	batch.Queue(upsertSteps, job, seq, name, status, worker, claim, rec)
	return nil
}

// sortedSteps is lastByKey for steps, without building a string key per
// step for the sort: a for_each batch holds thousands.
func sortedSteps(in []*engine.Step) []*engine.Step {
	type key struct {
		job  string
		seq  int
		name string
	}
	seen := make(map[key]int, len(in))
	out := make([]*engine.Step, 0, len(in))
	for _, s := range in {
		if s == nil {
			continue
		}
		k := key{s.JobID, s.Seq, s.Name}
		if i, ok := seen[k]; ok {
			out[i] = s
			continue
		}
		seen[k] = len(out)
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *engine.Step) int {
		return cmp.Or(strings.Compare(a.JobID, b.JobID), cmp.Compare(a.Seq, b.Seq), strings.Compare(a.Name, b.Name))
	})
	return out
}

func validateStep(s *engine.Step) error {
	if s.JobID == "" || s.Name == "" {
		return fmt.Errorf("step %q of job %q: job id and name are required: %w", s.Name, s.JobID, engine.ErrInvalid)
	}
	if s.Seq != int(int32(s.Seq)) {
		return fmt.Errorf("step %s/%s: seq %d out of range: %w", s.JobID, s.Name, s.Seq, engine.ErrInvalid)
	}
	for _, f := range []struct{ what, v string }{{"job id", s.JobID}, {"step name", s.Name}, {"step status", s.Status}} {
		if err := noNUL(f.what, f.v); err != nil {
			return err
		}
	}
	if s.WorkerID != nil {
		return noNUL("worker id", *s.WorkerID)
	}
	return nil
}

const upsertWorkers = `INSERT INTO workers AS w (id, registered_ns, rec)
SELECT * FROM unnest($1::text[], $2::int8[], $3::bytea[])
ON CONFLICT (id) DO UPDATE SET registered_ns = excluded.registered_ns, rec = excluded.rec`

func queueWorkers(batch *writes, in []*engine.Worker) error {
	workers := lastByKey(in, func(w *engine.Worker) string { return w.ID })
	if len(workers) == 0 {
		return nil
	}
	id, reg, rec := make([]string, len(workers)), make([]int64, len(workers)), make([][]byte, len(workers))
	for i, w := range workers {
		if w.ID == "" {
			return fmt.Errorf("worker without id: %w", engine.ErrInvalid)
		}
		if err := noNUL("worker id", w.ID); err != nil {
			return err
		}
		v, err := encode("worker "+w.ID, w)
		if err != nil {
			return err
		}
		id[i], reg[i], rec[i] = w.ID, w.RegisteredAt.UnixNano(), v
	}
	batch.Queue(upsertWorkers, id, reg, rec)
	return nil
}
