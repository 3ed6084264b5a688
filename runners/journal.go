package runners

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// journal holds one step run's log lines, numbered from 1, and then its
// result, until the server has them: lines go to the server in order and
// the result after the last of them. Remote workers keep journals in the
// spool on disk, so they outlive a server outage and a worker restart; the
// in-process pool, which cannot lose its server, keeps them in memory.
type journal interface {
	// Log appends a line; it is the Step.Log sink.
	Log(stream, line string)
	// Finish appends the result, which is kept whatever the bounds; no
	// line follows it.
	Finish(res Result)
	// Pending reads what the server does not have yet, from the oldest
	// undelivered line: at most maxLines lines of at most maxBytes in all
	// (at least one line), and the result once no line is left before it.
	Pending(maxLines, maxBytes int) (batch, error)
	// Ack records that the server has the batch's lines.
	Ack(b batch) error
	// Remove forgets the run: its result was delivered or refused.
	Remove()
	Meta() runMeta
}

// batch is what one delivery attempt sends.
type batch struct {
	Lines  []LogLine
	Result *Result // the run's result, once Lines reach it
	end    spoolPos
}

// runMeta names a step run: the claim it came from and the id that numbers
// its lines for the server.
type runMeta struct {
	Run      string    `json:"run"`
	JobID    string    `json:"job_id"`
	Step     string    `json:"step_name"`
	WorkerID string    `json:"worker_id"`
	Created  time.Time `json:"created"`
}

func newRunID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// dropNotice is the one line standing for the lines a full journal dropped.
func dropNotice(n int, bound string) LogLine {
	return LogLine{TS: time.Now().UTC(), Stream: Stderr,
		Line: fmt.Sprintf("[appliance worker: %d log lines dropped: %s]", n, bound)}
}

// maxMemoryLines bounds a memory journal: the in-process pool delivers as
// fast as the log file takes lines, so only a stuck disk fills it.
const maxMemoryLines = 100_000

// memJournal is a journal in memory.
type memJournal struct {
	meta runMeta
	log  *slog.Logger

	mu      sync.Mutex
	lines   []LogLine // undelivered, oldest first
	seq     int64     // number of the last line appended
	dropped int       // lines dropped since the journal filled
	res     *Result
}

func newMemJournal(meta runMeta, log *slog.Logger) *memJournal {
	return &memJournal{meta: meta, log: log}
}

func (j *memJournal) Meta() runMeta { return j.meta }

func (j *memJournal) Log(stream, line string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.res != nil {
		return
	}
	if len(j.lines) >= maxMemoryLines {
		if j.dropped == 0 {
			j.log.Warn("step log buffer full: dropping its further lines until the server takes some",
				"job_id", j.meta.JobID, "step", j.meta.Step, "max_lines", maxMemoryLines)
		}
		j.dropped++
		return
	}
	j.noticeLocked()
	j.add(LogLine{TS: time.Now().UTC(), Stream: stream, Line: line})
}

func (j *memJournal) add(l LogLine) {
	j.seq++
	l.Seq = j.seq
	j.lines = append(j.lines, l)
}

// noticeLocked appends the notice of dropped lines, if any were.
func (j *memJournal) noticeLocked() {
	if j.dropped > 0 {
		j.add(dropNotice(j.dropped, fmt.Sprintf("the worker's buffer of %d lines was full", maxMemoryLines)))
		j.dropped = 0
	}
}

func (j *memJournal) Finish(res Result) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.res != nil {
		return
	}
	j.noticeLocked()
	j.res = &res
}

func (j *memJournal) Pending(maxLines, maxBytes int) (batch, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	n, size := 0, 0
	for n < len(j.lines) && n < maxLines {
		size += len(j.lines[n].Line)
		if n > 0 && size > maxBytes {
			break
		}
		n++
	}
	b := batch{Lines: append([]LogLine(nil), j.lines[:n]...)}
	if n == len(j.lines) {
		b.Result = j.res
	}
	return b, nil
}

func (j *memJournal) Ack(b batch) error {
	if len(b.Lines) == 0 {
		return nil
	}
	last := b.Lines[len(b.Lines)-1].Seq
	j.mu.Lock()
	defer j.mu.Unlock()
	i := 0
	for i < len(j.lines) && j.lines[i].Seq <= last {
		i++
	}
	j.lines = append(j.lines[:0:0], j.lines[i:]...)
	return nil
}

func (j *memJournal) Remove() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = nil
}
