package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store"
)

var _ store.LogBackend = (*Logs)(nil)

// logTimeout bounds one statement of the log writer, which the engine's
// loop may be waiting on (Append and EndStep carry no context).
const logTimeout = 30 * time.Second

// Logs keeps the job logs in the database (migrations/0003_logs.sql), in
// chunks of whole JSONL lines, so any replica can read them. It shares the
// file backend's LogHub: one writer at a time per job in this process,
// the log_line and step_log limits, and live subscribers fed by this
// process's appends. The step runs' counts and marks are saved with the
// lines, so the step_log limit holds across a restart and a repeated push
// writes no line twice.
type Logs struct {
	*store.LogHub
	db  *DB
	med *logMedium
}

// OpenLogs returns the job logs kept in db, with the default limits. A
// process opens one: its hub orders the appends to each job.
func OpenLogs(db *DB) *Logs {
	med := &logMedium{db: db, now: time.Now, pos: make(map[string]*logPos)}
	return &Logs{LogHub: store.NewLogHub(med), db: db, med: med}
}

// logMedium is the LogMedium of Logs: the job_log tables.
type logMedium struct {
	db  *DB
	now func() time.Time

	mu sync.Mutex
	// pos caches where the next lines of a job go: read once from the
	// table by the job's first append here, then kept by the writes.
	pos map[string]*logPos
}

// logPos is how many lines a job's log holds, in all and per step.
type logPos struct {
	lines int64
	steps map[string]int64
}

// maxCachedPos bounds the jobs whose positions are kept in memory; one
// dropped is read again by its next append.
const maxCachedPos = 10000

// row is one run of lines of one step, as job_log_chunks stores it.
type row struct {
	lineEnd, stepEnd int64
	step             string
	lines            int32
	data             []byte
}

// Write stores the chunk's lines, its step runs and the job's totals in
// one batch, which PostgreSQL runs as one implicit transaction (one Sync
// ends it): a failed write leaves nothing half-applied. When another
// process wrote the job since this one read its position (the writer
// moved in a failover), the rows' keys collide: the position is read
// again and the write tried once more.
func (m *logMedium) Write(jobID string, c store.LogChunk) error {
	ctx, cancel := context.WithTimeout(context.Background(), logTimeout)
	defer cancel()
	err := m.write(ctx, jobID, c)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == uniqueViolation {
		err = m.write(ctx, jobID, c)
	}
	return err
}

func (m *logMedium) write(ctx context.Context, jobID string, c store.LogChunk) error {
	p, err := m.position(ctx, jobID)
	if err != nil {
		return err
	}
	next := logPos{lines: p.lines, steps: make(map[string]int64)}
	var rows []row
	start := 0
	for i := 0; i < len(c.Steps); {
		j := i + 1
		for j < len(c.Steps) && c.Steps[j] == c.Steps[i] {
			j++
		}
		step, n := c.Steps[i], int64(j-i)
		before, ok := next.steps[step]
		if !ok {
			before = p.steps[step]
		}
		next.lines += n
		next.steps[step] = before + n
		rows = append(rows, row{lineEnd: next.lines, stepEnd: before + n, step: step, lines: int32(n), data: c.Data[start:c.Ends[j-1]]})
		start = c.Ends[j-1]
		i = j
	}

	// A leader's lines carry the fence as its commits do (fence.go): a
	// deposed leader's appends are refused, not mixed into the new one's.
	epoch, fenced, err := m.db.fenceEpoch()
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	if fenced {
		b.Queue(fenceSQL, epoch)
	}
	if len(c.Ended) > 0 {
		// An ended run's mark stays for its late pushes (see LogChunk.Ended).
		b.Queue(`DELETE FROM job_log_runs WHERE job_id = $1 AND step = ANY($2) AND run = ''`, jobID, c.Ended)
		b.Queue(`UPDATE job_log_runs SET bytes = 0, capped = false, dropped_bytes = 0, dropped_lines = 0
			WHERE job_id = $1 AND step = ANY($2) AND run <> ''`, jobID, c.Ended)
	}
	if len(rows) > 0 {
		lineEnds, stepEnds := make([]int64, len(rows)), make([]int64, len(rows))
		steps, counts, datas := make([]string, len(rows)), make([]int32, len(rows)), make([][]byte, len(rows))
		for i, r := range rows {
			lineEnds[i], stepEnds[i], steps[i], counts[i], datas[i] = r.lineEnd, r.stepEnd, r.step, r.lines, r.data
		}
		b.Queue(`INSERT INTO job_log_chunks (job_id, line_end, step, step_end, lines, data)
			SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::integer[], $6::bytea[])`,
			jobID, lineEnds, steps, stepEnds, counts, datas)
		b.Queue(`INSERT INTO job_logs (job_id, lines, bytes, written_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (job_id) DO UPDATE SET lines = excluded.lines, bytes = job_logs.bytes + excluded.bytes,
				written_at = CASE WHEN $5 THEN job_logs.written_at ELSE excluded.written_at END`,
			jobID, next.lines, int64(len(c.Data)), m.now().UTC(), c.Note)
	}
	if len(c.Runs) > 0 {
		var (
			steps, runs               []string
			bytes, dropped, drop, seq []int64
			capped                    []bool
		)
		for step, r := range c.Runs {
			steps, bytes, capped = append(steps, step), append(bytes, r.Bytes), append(capped, r.Capped)
			dropped, drop = append(dropped, r.DroppedBytes), append(drop, int64(r.DroppedLines))
			runs, seq = append(runs, r.Mark.Run), append(seq, r.Mark.Seq)
		}
		b.Queue(`INSERT INTO job_log_runs (job_id, step, bytes, capped, dropped_bytes, dropped_lines, run, seq)
			SELECT $1, * FROM unnest($2::text[], $3::bigint[], $4::boolean[], $5::bigint[], $6::bigint[], $7::text[], $8::bigint[])
			ON CONFLICT (job_id, step) DO UPDATE SET bytes = excluded.bytes, capped = excluded.capped,
				dropped_bytes = excluded.dropped_bytes, dropped_lines = excluded.dropped_lines,
				run = excluded.run, seq = excluded.seq`,
			jobID, steps, bytes, capped, dropped, drop, runs, seq)
	}
	if b.Len() == boolInt(fenced) {
		return nil
	}
	if err := m.db.pool.SendBatch(ctx, b).Close(); err != nil {
		// Whatever failed, the position is read again next time.
		m.forget(jobID)
		return fmt.Errorf("write log: %w", fenceError(err))
	}
	m.mu.Lock()
	p.lines = next.lines
	for step, n := range next.steps {
		p.steps[step] = n
	}
	m.mu.Unlock()
	return nil
}

// position returns where the job's next lines go. The caller holds the
// job's lock, so the entry is changed by one writer at a time.
func (m *logMedium) position(ctx context.Context, jobID string) (*logPos, error) {
	m.mu.Lock()
	p := m.pos[jobID]
	m.mu.Unlock()
	if p != nil {
		return p, nil
	}
	p = &logPos{steps: make(map[string]int64)}
	rows, err := m.db.pool.Query(ctx, `SELECT step, max(step_end) FROM job_log_chunks WHERE job_id = $1 GROUP BY step`, jobID)
	if err != nil {
		return nil, fmt.Errorf("read log position: %w", err)
	}
	var step string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&step, &n}, func() error {
		p.steps[step] = n
		p.lines += n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read log position: %w", err)
	}
	m.mu.Lock()
	if len(m.pos) >= maxCachedPos {
		for id := range m.pos {
			delete(m.pos, id)
			break
		}
	}
	m.pos[jobID] = p
	m.mu.Unlock()
	return p, nil
}

func (m *logMedium) forget(jobID string) {
	m.mu.Lock()
	delete(m.pos, jobID)
	m.mu.Unlock()
}

// Marks reads the job's steps' last run marks.
func (m *logMedium) Marks(jobID string) (map[string]store.RunMark, error) {
	ctx, cancel := context.WithTimeout(context.Background(), logTimeout)
	defer cancel()
	rows, err := m.db.pool.Query(ctx, `SELECT step, run, seq FROM job_log_runs WHERE job_id = $1 AND run <> ''`, jobID)
	if err != nil {
		return nil, fmt.Errorf("read log marks: %w", err)
	}
	marks := map[string]store.RunMark{}
	var step string
	var mark store.RunMark
	if _, err := pgx.ForEachRow(rows, []any{&step, &mark.Run, &mark.Seq}, func() error {
		marks[step] = mark
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read log marks: %w", err)
	}
	return marks, nil
}

// Runs reads the job's open step runs as the last write left them.
func (m *logMedium) Runs(jobID string) (store.StepRuns, error) {
	ctx, cancel := context.WithTimeout(context.Background(), logTimeout)
	defer cancel()
	rows, err := m.db.pool.Query(ctx, `SELECT step, bytes, capped, dropped_bytes, dropped_lines, run, seq FROM job_log_runs WHERE job_id = $1`, jobID)
	if err != nil {
		return nil, fmt.Errorf("read step runs: %w", err)
	}
	runs := store.StepRuns{}
	var step string
	var r store.StepRun
	var dropped int64
	_, err = pgx.ForEachRow(rows, []any{&step, &r.Bytes, &r.Capped, &r.DroppedBytes, &dropped, &r.Mark.Run, &r.Mark.Seq}, func() error {
		r.DroppedLines = int(dropped)
		cp := r
		runs[step] = &cp
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read step runs: %w", err)
	}
	return runs, nil
}

// Backfill fixes the end of the log at the lines it holds now; the read
// runs as the caller reads, bounded by that end.
func (m *logMedium) Backfill(jobID string, q engine.LogQuery) (io.ReadCloser, error) {
	ctx, cancel := context.WithTimeout(context.Background(), logTimeout)
	defer cancel()
	end, _, err := m.db.logTotals(ctx, jobID)
	if err != nil {
		return nil, err
	}
	after := int64(q.After)
	if q.Tail > 0 {
		after = max(0, end-int64(q.Tail))
	}
	if after >= end {
		return io.NopCloser(strings.NewReader("")), nil
	}
	return &lazyRead{read: func(ctx context.Context, w io.Writer) error {
		_, err := m.db.readLines(ctx, jobID, "", after, end, w)
		return err
	}}, nil
}

// lazyRead starts its read at the first Read: a backfill that is closed
// unread (a viewer gone at once) never takes a connection from the pool.
type lazyRead struct {
	read func(ctx context.Context, w io.Writer) error
	r    io.ReadCloser
}

func (l *lazyRead) Read(p []byte) (int, error) {
	if l.r == nil {
		l.r = store.PipeRead(context.Background(), l.read)
	}
	return l.r.Read(p)
}

func (l *lazyRead) Close() error {
	if l.r == nil {
		return nil
	}
	return l.r.Close()
}

// logTotals reads how many lines the job's log holds and their bytes; a
// job without a log has none.
func (db *DB) logTotals(ctx context.Context, jobID string) (lines, bytes int64, err error) {
	err = db.pool.QueryRow(ctx, `SELECT lines, bytes FROM job_logs WHERE job_id = $1`, jobID).Scan(&lines, &bytes)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read log of job %s: %w", jobID, err)
	}
	return lines, bytes, nil
}

// uniqueViolation is PostgreSQL's SQLSTATE for a duplicate key.
const uniqueViolation = "23505"

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
