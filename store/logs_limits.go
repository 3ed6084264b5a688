package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/appliance-sh/appliance/engine"
	"github.com/docker/go-units"
)

// Default log limits (server config `limits.step_log`, `limits.log_line`).
const (
	DefaultStepLog = 100 << 20
	DefaultLogLine = 64 << 10
)

// LogLimits bound what a job's log may hold; zero fields take the defaults.
type LogLimits struct {
	// StepLog is how many bytes one step run may print into its log:
	// each line's bytes plus its newline, as the step printed them (after
	// the log_line cut), not the JSON envelope (ts, stream, step) the
	// file stores them in. The line that would go over it and every later
	// line of the run are dropped, and when the run ends one `_server`
	// warning says how much, in the same unit. `_server` lines are the
	// orchestrator's own and not counted.
	StepLog int64
	// LogLine is how many bytes of text one line may carry; the rest is
	// cut and replaced by a marker saying how much was dropped.
	LogLine int
}

func (lim LogLimits) withDefaults() LogLimits {
	if lim.StepLog <= 0 {
		lim.StepLog = DefaultStepLog
	}
	if lim.LogLine <= 0 {
		lim.LogLine = DefaultLogLine
	}
	return lim
}

// SetLimits sets the log limits; call it before the first Append.
func (h *LogHub) SetLimits(lim LogLimits) { h.limits = lim.withDefaults() }

// jobCounts is the per-step count of one job's log.
//
// A run's count lives in memory from the job's first append until the
// step run ends (EndStep) or the job does (Finish), when the warning of a
// capped run is written; the steps' marks live until the job ends. A
// server that restarts loses it, so the first append to a job after a
// restart asks the medium for the runs still open: the files
// recount the job's log once (a sequential read of no more than the limits
// allow per step), so a run that reached the limit before the restart
// trips it again with its next line, and its warning then counts what was
// dropped since; a medium that saves the runs with the lines (PostgreSQL)
// returns them as they were.
type jobCounts struct {
	runs StepRuns
	// ended are the runs closed since the job's last write, for a medium
	// that saves runs to forget with the next one.
	ended []string
	// marks holds each step's last run mark (StepRun.Mark), whether its run
	// is open or ended: a run the server ended (a cancel, a timeout) may
	// still push, its worker's last words or a push repeated because its
	// answer was lost, and must not write twice what the log has. A medium
	// that forgets an ended run keeps its mark (see LogChunk.Ended).
	marks map[string]RunMark
}

// run returns the step's open run, opening one that carries the step's
// last mark.
func (c *jobCounts) run(step string) *StepRun {
	s := c.runs[step]
	if s == nil {
		s = &StepRun{Mark: c.marks[step]}
		c.runs[step] = s
	}
	return s
}

// setMark records the step's run mark, in its open run and in marks.
func (c *jobCounts) setMark(step string, s *StepRun, m RunMark) {
	s.Mark = m
	if m.Run == "" {
		delete(c.marks, step)
		return
	}
	if c.marks == nil {
		c.marks = map[string]RunMark{}
	}
	c.marks[step] = m
}

// maxCountedJobs bounds the jobs whose counts are kept in memory.
const maxCountedJobs = 10000

// counts returns the job's step counts, loading them from the medium on
// first use. The caller holds the job's lock.
func (h *LogHub) counts(jobID string) (*jobCounts, error) {
	h.mu.Lock()
	c, ok := h.stepCounts[jobID]
	h.mu.Unlock()
	if ok {
		return c, nil
	}
	runs, err := h.medium.Runs(jobID)
	if err != nil {
		return nil, fmt.Errorf("count log of job %s: %w", jobID, err)
	}
	if runs == nil {
		runs = StepRuns{}
	}
	c = &jobCounts{runs: runs}
	for step, r := range runs {
		if r.Mark.Run != "" {
			c.setMark(step, r, r.Mark)
		}
	}
	h.mu.Lock()
	if len(h.stepCounts) >= maxCountedJobs {
		// Finish forgets a job's counts; lines that reach a job after it
		// finished bring them back. This bounds those: a job dropped here
		// is recounted if it logs again.
		for id := range h.stepCounts {
			delete(h.stepCounts, id)
			break
		}
	}
	h.stepCounts[jobID] = c
	h.mu.Unlock()
	return c, nil
}

// countFile sums the printed bytes of each step in a JSONL log file.
func countFile(path string) (StepRuns, error) {
	c := StepRuns{}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	err = eachLine(bufio.NewReaderSize(f, readBlock), func(first []byte, whole bool, size int64) {
		step, ok := stepOf(first, whole)
		if !ok {
			return
		}
		if step == engine.ServerStep {
			// A warning closes its step's run: a later line is a new run's.
			if ended, ok := cappedStepOf(first, whole); ok {
				delete(c, ended)
			}
			return
		}
		c.step(step).Bytes += storedPrintedSize(first, whole, size)
	})
	return c, err
}

// printedSize is what a line counts against the step_log limit: its
// bytes and its newline, as the step printed them.
func printedSize(line string) int64 { return int64(len(line)) + 1 }

// storedPrintedSize is the printedSize of a stored line. A line too long
// to read whole (over readBlock stored bytes, which the log_line cut makes
// rare) counts its stored size, a little more than it printed.
func storedPrintedSize(first []byte, whole bool, size int64) int64 {
	if !whole {
		return size
	}
	var l wireLine
	if json.Unmarshal(first, &l) != nil {
		return size
	}
	return printedSize(l.Line)
}

func (c StepRuns) step(name string) *StepRun {
	s := c[name]
	if s == nil {
		s = &StepRun{}
		c[name] = s
	}
	return s
}

// capWarningPrefix starts the `_server` line written when a step run that
// reached the step_log limit ends; a recount after a restart looks for it.
const capWarningPrefix = "log of step "

func capWarning(step string, limit int64, s *StepRun) string {
	return fmt.Sprintf("%s%s cut at the step_log limit of %s: %d bytes kept, %d bytes in %d lines dropped (bytes the step printed, each line with its newline; raise limits.step_log in the server config to keep more)",
		capWarningPrefix, strconv.Quote(step), limitText(limit), s.Bytes, s.DroppedBytes, s.DroppedLines)
}

// cappedStepOf returns the step a cap warning line names.
func cappedStepOf(first []byte, whole bool) (string, bool) {
	if !whole {
		return "", false
	}
	var l wireLine
	if json.Unmarshal(first, &l) != nil || !strings.HasPrefix(l.Line, capWarningPrefix) || !strings.Contains(l.Line, "step_log limit") {
		return "", false
	}
	rest := strings.TrimPrefix(l.Line, capWarningPrefix)
	quoted, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return "", false
	}
	step, err := strconv.Unquote(quoted)
	return step, err == nil
}

// admit decides which encoded lines are written: of those keep marks
// (nil = all; the others are in the log already), a step's lines until the
// one whose printed bytes would take it past the limit, then none,
// counting what it drops. ends[i] is where line i ends in chunk. The
// chunk it returns carries the runs it changed, as they stand after it.
func (h *LogHub) admit(c *jobCounts, lines []engine.LogLine, chunk []byte, ends []int, keep []bool) LogChunk {
	out := LogChunk{Steps: make([]string, 0, len(lines)), Ends: make([]int, 0, len(lines))}
	var data []byte
	start := 0
	for i, ln := range lines {
		enc := chunk[start:ends[i]]
		start = ends[i]
		if keep != nil && !keep[i] {
			if data == nil {
				data = append(make([]byte, 0, len(chunk)), chunk[:start-len(enc)]...)
			}
			continue
		}
		if ln.Step != engine.ServerStep {
			s := c.run(ln.Step)
			if out.Runs == nil {
				out.Runs = StepRuns{}
			}
			out.Runs[ln.Step] = s
			size := printedSize(ln.Line)
			if s.Capped || s.Bytes+size > h.limits.StepLog {
				s.Capped = true
				s.DroppedBytes += size
				s.DroppedLines++
				if data == nil {
					data = append(make([]byte, 0, len(chunk)), chunk[:start-len(enc)]...)
				}
				continue
			}
			s.Bytes += size
		}
		if data != nil {
			data = append(data, enc...)
		}
		out.Steps = append(out.Steps, ln.Step)
		if data != nil {
			out.Ends = append(out.Ends, len(data))
		} else {
			out.Ends = append(out.Ends, ends[i])
		}
	}
	out.Data = chunk // the common case: nothing dropped, no copy made
	if data != nil {
		out.Data = data
	}
	// The medium gets copies: the counts go on changing under later
	// appends while it may still hold them.
	for step, s := range out.Runs {
		cp := *s
		out.Runs[step] = &cp
	}
	return out
}

// savesRuns says whether the chunk changes any step run.
func (c LogChunk) savesRuns() bool { return len(c.Runs) > 0 || len(c.Ended) > 0 }

// EndStep closes a step run's count, so a next run (a retry) starts from
// nothing, and writes the warning of a run that went over the step_log
// limit. The engine calls it once the run has ended (engine.StepLogEnder).
func (h *LogHub) EndStep(jobID, step string) error {
	if err := ValidJobID(jobID); err != nil {
		return fmt.Errorf("end step log: %w", err)
	}
	jl := h.lock(jobID)
	defer h.release(jobID, jl)
	h.mu.Lock()
	c := h.stepCounts[jobID]
	var s *StepRun
	if c != nil {
		s = c.runs[step]
		delete(c.runs, step)
	}
	h.mu.Unlock()
	if s == nil {
		return nil
	}
	if !s.Capped {
		// Nothing to write now: the medium forgets the run with the job's
		// next write, so ending a step costs no I/O.
		c.ended = append(c.ended, step)
		return nil
	}
	return h.endRuns(jobID, jl, c, StepRuns{step: s})
}

// endRuns writes the warning of each capped run in runs, and has the
// medium forget them and the runs ended before. The caller holds the
// job's lock.
func (h *LogHub) endRuns(jobID string, jl *jobLog, c *jobCounts, runs StepRuns) error {
	var lines []engine.LogLine
	ended := c.ended
	c.ended = nil
	for _, step := range slices.Sorted(maps.Keys(runs)) {
		ended = append(ended, step)
		if s := runs[step]; s.Capped {
			lines = append(lines, engine.LogLine{Stream: "stderr", Step: engine.ServerStep, Line: capWarning(step, h.limits.StepLog, s)})
		}
	}
	if len(lines) == 0 && len(ended) == 0 {
		return nil
	}
	chunk, ends := encodeLines(lines)
	steps := make([]string, len(lines))
	for i := range steps {
		steps[i] = engine.ServerStep
	}
	if err := h.write(jobID, jl, LogChunk{Data: chunk, Steps: steps, Ends: ends, Ended: ended}); err != nil {
		return fmt.Errorf("write the step_log warning to the log of job %s: %w", jobID, err)
	}
	return nil
}

// cutLine cuts a line longer than max bytes at a character boundary and
// says how much it dropped.
func cutLine(line string, max int) string {
	if len(line) <= max {
		return line
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… [line cut at %s limit, %d bytes dropped]", line[:cut], limitText(int64(max)), len(line)-cut)
}

// eachLine calls f for every line of r: first is the line, or its first
// readBlock bytes when it is longer (whole is false then), and size its
// full length including the newline.
func eachLine(r *bufio.Reader, f func(first []byte, whole bool, size int64)) error {
	var first []byte
	var size int64
	for {
		frag, err := r.ReadSlice('\n')
		if size == 0 && len(frag) > 0 {
			if err == bufio.ErrBufferFull {
				first = bytes.Clone(frag)
			} else {
				first = frag
			}
		}
		size += int64(len(frag))
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == nil || (err == io.EOF && size > 0):
			f(first, err == nil && size == int64(len(first)), size)
			size = 0
		}
		if err == io.EOF {
			return nil
		}
		if err != nil && err != bufio.ErrBufferFull {
			return err
		}
	}
}

// limitText writes a byte limit the way the config reads it (1MB, 64KB), or
// as "100 bytes" when it is no whole unit.
func limitText(n int64) string {
	for i, u := range []int64{units.GiB, units.MiB, units.KiB} {
		if n >= u && n%u == 0 {
			return fmt.Sprintf("%d%s", n/u, []string{"GB", "MB", "KB"}[i])
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
