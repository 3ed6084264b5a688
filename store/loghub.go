package store

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store/dump"
)

// subscriberBuffer is how many appended chunks a live viewer may fall
// behind before it is dropped (it then reconnects for a fresh backfill).
const subscriberBuffer = 256

// LogMedium is where a LogHub keeps the lines: the JSONL files of *Logs,
// or a database table (store/postgres). The hub calls it under the job's
// lock, so it sees one call at a time per job.
type LogMedium interface {
	// Write stores the chunk after the job's earlier lines. A chunk may
	// carry no lines and only step runs to save or forget.
	Write(jobID string, c LogChunk) error
	// Runs returns the job's step runs still open, for a job whose counts
	// the hub does not hold (its first append since the process started).
	Runs(jobID string) (StepRuns, error)
	// Marks returns each step's last run mark (StepRun.Mark), without
	// counting the log: what an export reads of a job it does not hold.
	Marks(jobID string) (map[string]RunMark, error)
	// Backfill fixes the end of the job's log as it stands now and returns
	// the part of it q selects (q.Step is ignored), read as the caller
	// reads it. A job without a log has an empty backfill.
	Backfill(jobID string, q engine.LogQuery) (io.ReadCloser, error)
}

// LogChunk is what one append, or the end of a step run, writes.
type LogChunk struct {
	Data  []byte   // the kept lines, JSONL; empty when there are none
	Steps []string // the step of each line of Data
	Ends  []int    // where each line of Data ends
	// Runs are the step runs the chunk changed, as they stand after it: a
	// medium that keeps them (so the step_log limit holds across a
	// restart) overwrites its copies with these.
	Runs StepRuns
	// Ended are the step runs closed since the job's last write, to forget;
	// a medium that keeps runs keeps an ended run's mark (StepRun.Mark)
	// with its counts zeroed, for the pushes that still come from it, and
	// returns it from Runs.
	Ended []string
	// Note marks a line about the log (retention's), which keeps the log's
	// last-written time.
	Note bool
	// Marked is the step whose run mark the chunk advances
	// (Runs[Marked].Mark), "" when it advances none. A medium that saves
	// Runs in the same write as the lines needs nothing more; one that
	// cannot (the files) also gets the mark Marked had before (Prev) and
	// every step's last mark, its run open or ended (Marks, Marked's new
	// one included; the hub's own map, to read during Write only), to tell
	// after a restart whether the lines reached the log.
	Marked string
	Prev   RunMark
	Marks  map[string]RunMark
}

// StepRun is how much one step run has written to its job's log, and
// dropped once over the step_log limit.
type StepRun struct {
	Bytes        int64 // printed bytes kept (see printedSize)
	Capped       bool  // the limit tripped: later lines are dropped
	DroppedBytes int64 // printed bytes of the dropped lines
	DroppedLines int
	// Mark is the run of the step that pushed numbered lines last and the
	// number of its last line appended (see LogHub.AppendRun).
	Mark RunMark
}

// RunMark names a step run that pushed numbered lines and the number of
// the last one the log holds; the zero mark names none.
type RunMark struct {
	Run string
	Seq int64
}

// StepRuns are a job's open step runs by step name.
type StepRuns map[string]*StepRun

// LogHub is what every job log backend shares, wherever its lines are:
// one writer at a time per job, live subscribers fed by the appends, and
// the log_line and step_log limits with their per-step counts.
type LogHub struct {
	medium    LogMedium
	subBuffer int // chunks per subscriber channel

	limits LogLimits

	mu   sync.Mutex // guards jobs and stepCounts; each jobLog has its own lock for I/O
	jobs map[string]*jobLog
	// stepCounts holds the running jobs' per-step byte counts for the
	// step_log cap; an entry is changed only under its job's lock.
	stepCounts map[string]*jobCounts
}

// jobLog is the live state of one job's log: its subscribers. Its mutex
// orders appends with subscriptions, so a subscriber sees every chunk
// exactly once, in backfill or as an update. It exists while an append is
// under way or someone watches.
type jobLog struct {
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	closed bool // removed from LogHub.jobs; callers retry
}

type subscriber struct {
	ch chan []byte
}

// NewLogHub returns a hub keeping its lines in m, with the default limits
// (see SetLimits).
func NewLogHub(m LogMedium) *LogHub {
	return &LogHub{medium: m, subBuffer: subscriberBuffer, limits: LogLimits{}.withDefaults(),
		jobs: make(map[string]*jobLog), stepCounts: make(map[string]*jobCounts)}
}

// SetSubscriberBuffer sets how many chunks a live viewer may fall behind
// before it is dropped (default 256); call it before the first Subscribe.
func (h *LogHub) SetSubscriberBuffer(n int) {
	if n > 0 {
		h.subBuffer = n
	}
}

// ValidJobID refuses ids that could name a file outside a log dir. Every
// backend refuses the same ids, so a job's log can move between them.
func ValidJobID(id string) error {
	if id == "" || len(id) > 255 || strings.ContainsAny(id, "/\\\x00") || strings.Contains(id, "..") || id == "." {
		return fmt.Errorf("job id %q is not a safe log file name: %w", id, engine.ErrInvalid)
	}
	return nil
}

// lock returns the job's state, locked and still registered: Finish may
// retire a jobLog between the map lookup and the lock, so retry then.
func (h *LogHub) lock(jobID string) *jobLog {
	for {
		h.mu.Lock()
		jl := h.jobs[jobID]
		if jl == nil {
			jl = &jobLog{subs: make(map[*subscriber]struct{})}
			h.jobs[jobID] = jl
		}
		h.mu.Unlock()
		jl.mu.Lock()
		if !jl.closed {
			return jl
		}
		jl.mu.Unlock()
	}
}

// release unlocks a job's state, retiring it when nobody watches.
func (h *LogHub) release(jobID string, jl *jobLog) {
	if len(jl.subs) == 0 {
		jl.closed = true
		h.mu.Lock()
		if h.jobs[jobID] == jl {
			delete(h.jobs, jobID)
		}
		h.mu.Unlock()
	}
	jl.mu.Unlock()
}

// Locked runs f holding the job's lock, so no append to the job runs
// meanwhile (a backend's Remove uses it).
func (h *LogHub) Locked(jobID string, f func() error) error {
	jl := h.lock(jobID)
	defer h.release(jobID, jl)
	return f()
}

// Append writes the lines to the job's log as one chunk and hands that
// chunk to the job's live subscribers without waiting for them. Lines
// longer than the log_line limit are cut, and a step's lines beyond its
// step_log limit are dropped (see LogLimits).
func (h *LogHub) Append(jobID string, lines []engine.LogLine) error {
	return h.append(jobID, lines, false, nil)
}

// AppendNote appends a line about the log itself, which keeps the log's
// last-written time, so a note does not restart its retention.
func (h *LogHub) AppendNote(jobID string, line engine.LogLine) error {
	return h.append(jobID, []engine.LogLine{line}, true, nil)
}

// AppendRun is Append for the lines a run of step pushed, numbered from 1
// within the run (engine.LogLine.Seq): the lines numbered at or below the
// last one appended for the same run are skipped, and the new mark is
// written in the same chunk as the lines, so a push repeated after a lost
// answer, even to a restarted server, writes no line twice. Unnumbered
// lines are always appended, and another run of the step numbers afresh.
// It implements engine.RunLogSink.
func (h *LogHub) AppendRun(jobID, step, run string, lines []engine.LogLine) error {
	if run == "" {
		return h.Append(jobID, lines)
	}
	return h.append(jobID, lines, false, &pushRun{step: step, run: run})
}

// pushRun is the step run whose numbered lines an append carries.
type pushRun struct{ step, run string }

func (h *LogHub) append(jobID string, lines []engine.LogLine, note bool, pr *pushRun) error {
	if err := ValidJobID(jobID); err != nil {
		return fmt.Errorf("append log: %w", err)
	}
	if len(lines) == 0 {
		return nil
	}
	lines = h.cutLines(lines)
	chunk, ends := encodeLines(lines)
	jl := h.lock(jobID)
	defer h.release(jobID, jl)
	counts, err := h.counts(jobID)
	if err != nil {
		return fmt.Errorf("append log of job %s: %w", jobID, err)
	}
	var keep []bool
	var run *StepRun
	var prev, next RunMark
	if pr != nil {
		run = counts.run(pr.step)
		prev = run.Mark
		if keep, next = freshLines(prev, pr.run, lines); keep == nil {
			return nil // the log has every line
		}
		counts.setMark(pr.step, run, next)
	}
	c := h.admit(counts, lines, chunk, ends, keep)
	c.Note = note
	if run != nil && next != prev {
		cp := *run
		if c.Runs == nil {
			c.Runs = StepRuns{}
		}
		c.Runs[pr.step] = &cp
		c.Marked, c.Prev, c.Marks = pr.step, prev, counts.marks
	}
	if len(c.Data) == 0 && !c.savesRuns() {
		return nil
	}
	c.Ended, counts.ended = counts.ended, nil
	if err := h.write(jobID, jl, c); err != nil {
		if run != nil {
			counts.setMark(pr.step, run, prev) // the lines are not in: a repeat must bring them
		}
		return fmt.Errorf("append log of job %s: %w", jobID, err)
	}
	return nil
}

// freshLines says which of a run's pushed lines the log lacks, given the
// step's mark, and returns the mark once they are in: every unnumbered
// line, and each numbered one past the highest number before it. keep is
// nil when the log has them all.
func freshLines(mark RunMark, run string, lines []engine.LogLine) (keep []bool, next RunMark) {
	next = mark
	if mark.Run != run {
		next = RunMark{Run: run} // another run numbers afresh
	}
	keep = make([]bool, len(lines))
	some := false
	for i, l := range lines {
		if l.Seq == 0 || l.Seq > next.Seq {
			keep[i], some = true, true
			next.Seq = max(next.Seq, l.Seq)
		}
	}
	switch {
	case !some:
		return nil, mark
	case next.Seq == 0:
		return keep, mark // only unnumbered lines: the mark stays
	}
	return keep, next
}

// RunMarks returns each step's last run mark in the job's log, by step
// (see jobCounts.marks).
func (h *LogHub) RunMarks(jobID string) ([]dump.Mark, error) {
	if err := ValidJobID(jobID); err != nil {
		return nil, fmt.Errorf("read log marks: %w", err)
	}
	jl := h.lock(jobID)
	defer h.release(jobID, jl)
	h.mu.Lock()
	counts := h.stepCounts[jobID]
	h.mu.Unlock()
	marks := map[string]RunMark(nil)
	if counts != nil {
		marks = counts.marks
	} else {
		var err error
		if marks, err = h.medium.Marks(jobID); err != nil {
			return nil, fmt.Errorf("read log marks: %w", err)
		}
	}
	var out []dump.Mark
	for _, step := range slices.Sorted(maps.Keys(marks)) {
		m := marks[step]
		out = append(out, dump.Mark{JobID: jobID, Step: step, Run: m.Run, Seq: m.Seq})
	}
	return out, nil
}

// RestoreRunMarks records marks as the steps' last run marks, each as a
// push of no new line would (an import's, see RunMarks).
func (h *LogHub) RestoreRunMarks(jobID string, marks []dump.Mark) error {
	if err := ValidJobID(jobID); err != nil {
		return fmt.Errorf("restore log marks: %w", err)
	}
	jl := h.lock(jobID)
	defer h.release(jobID, jl)
	counts, err := h.counts(jobID)
	if err != nil {
		return fmt.Errorf("restore log marks: %w", err)
	}
	for _, m := range marks {
		if m.Run == "" || m.Step == "" || m.Step == engine.ServerStep || m.Seq < 0 {
			return fmt.Errorf("restore log marks of job %s: step %q run %q seq %d: %w", jobID, m.Step, m.Run, m.Seq, engine.ErrInvalid)
		}
		run := counts.run(m.Step)
		prev := run.Mark
		counts.setMark(m.Step, run, RunMark{Run: m.Run, Seq: m.Seq})
		cp := *run
		c := LogChunk{Runs: StepRuns{m.Step: &cp}, Marked: m.Step, Prev: prev, Marks: counts.marks}
		if err := h.write(jobID, jl, c); err != nil {
			counts.setMark(m.Step, run, prev)
			return fmt.Errorf("restore log marks of job %s: %w", jobID, err)
		}
	}
	return nil
}

// write stores a chunk and hands its lines to the job's live subscribers.
// The caller holds the job's lock.
func (h *LogHub) write(jobID string, jl *jobLog, c LogChunk) error {
	if err := h.medium.Write(jobID, c); err != nil {
		return err
	}
	if len(c.Data) > 0 {
		h.publish(jl, c.Data)
	}
	return nil
}

// publish hands a chunk to a job's live subscribers; the caller holds the
// job's lock.
func (h *LogHub) publish(jl *jobLog, chunk []byte) {
	for s := range jl.subs {
		select {
		case s.ch <- chunk:
		default:
			// A full buffer means a slow viewer: dropping it keeps writers
			// and other viewers moving; it reconnects for a fresh backfill.
			close(s.ch)
			delete(jl.subs, s)
		}
	}
}

// cutLines returns the lines with each one cut to the log_line limit,
// copying only when one is too long.
func (h *LogHub) cutLines(lines []engine.LogLine) []engine.LogLine {
	for i, ln := range lines {
		if len(ln.Line) <= h.limits.LogLine {
			continue
		}
		cut := append([]engine.LogLine(nil), lines...)
		for j := i; j < len(cut); j++ {
			cut[j].Line = cutLine(cut[j].Line, h.limits.LogLine)
		}
		return cut
	}
	return lines
}

// Finish ends the job's live subscriptions; each subscriber still receives
// every chunk already sent before its channel reports closed. Lines
// appended later are still written. A capped step run that EndStep did not
// close gets its warning first.
func (h *LogHub) Finish(jobID string) {
	if ValidJobID(jobID) == nil {
		jl := h.lock(jobID)
		h.mu.Lock()
		counts := h.stepCounts[jobID]
		delete(h.stepCounts, jobID)
		h.mu.Unlock()
		if counts != nil {
			// Finish has no caller to answer: a failed write leaves the log
			// without the warning, as it would any line.
			_ = h.endRuns(jobID, jl, counts, counts.runs)
		}
		h.release(jobID, jl)
	}
	h.mu.Lock()
	jl := h.jobs[jobID]
	delete(h.jobs, jobID)
	h.mu.Unlock()
	if jl != nil {
		jl.retire()
	}
}

// Close finishes every subscription; the hub must not be used afterwards.
func (h *LogHub) Close() error {
	h.mu.Lock()
	jobs := h.jobs
	h.jobs = make(map[string]*jobLog)
	h.mu.Unlock()
	for _, jl := range jobs {
		jl.retire()
	}
	return nil
}

func (jl *jobLog) retire() {
	jl.mu.Lock()
	defer jl.mu.Unlock()
	jl.closed = true
	for s := range jl.subs {
		close(s.ch)
	}
	jl.subs = nil
}
