package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/appliance-sh/appliance/runners"
)

// journal holds one step run's log lines, numbered from 1, and then its
// result, until the server has them: lines go to the server in order and
// the result after the last of them. Remote workers keep journals in the
// spool on disk, so they outlive a server outage and a worker restart; the
// in-process pool, which cannot lose its server, keeps them in memory.
//
// A journal is bounded, and a full one makes the step wait rather than
// lose a line: Log blocks until delivery frees room (see room).
type journal interface {
	// Log appends a line; it is the runners.Step.Log sink. It waits while the
	// journal is full, until delivery frees room or ctx (the step's) ends:
	// a line that finds no room then is dropped, and one notice naming the
	// cause stands for such lines.
	Log(ctx context.Context, stream, line string)
	// Flush writes out the lines Log holds back (see runners.Step.Flush).
	Flush()
	// Finish appends the result, which is kept whatever the bounds; no
	// line follows it.
	Finish(res Result)
	// Pending reads what the server does not have yet, from the oldest
	// undelivered line: at most maxLines lines of at most maxBytes in all
	// (at least one line), and the result once no line is left before it.
	Pending(maxLines, maxBytes int) (batch, error)
	// Ack records that the server has the batch's lines, which frees room.
	Ack(b batch) error
	// Remove forgets the run: its result was delivered or refused.
	Remove()
	// Persist makes the result survive a crash of the machine: delivery
	// calls it once the server did not take the result at once, so a
	// result the server takes at its first sending costs no fsync.
	Persist() error
	Meta() runMeta
	// Wanted is closed when a writer next waits for room: delivery should
	// push now. Take it before a delivery attempt.
	Wanted() <-chan struct{}
}

// batch is what one delivery attempt sends.
type batch struct {
	Lines []LogLine
	// raw, from a journal asked for it (see rawJournal), holds the lines
	// instead of Lines: the elements of a push's lines, comma-separated,
	// n of them, the last numbered last.
	raw    []byte
	n      int
	last   int64
	Result *Result // the run's result, once the lines reach it
	end    spoolPos
}

// lines is how many lines b holds.
func (b batch) lines() int {
	if b.raw != nil {
		return b.n
	}
	return len(b.Lines)
}

// lastSeq is the number of b's last line (b holds lines).
func (b batch) lastSeq() int64 {
	if b.raw != nil {
		return b.last
	}
	return b.Lines[len(b.Lines)-1].Seq
}

// rawJournal is a journal that can hand out its lines already coded for
// a push: the spool keeps them so, and decoding them only to code them
// again was most of the worker's time delivering a flood of lines.
type rawJournal interface {
	// PendingRaw is Pending with the lines in raw, appended to dst[:0].
	PendingRaw(dst []byte, maxLines, maxBytes int) (batch, error)
	// PendingRawAfter is PendingRaw as if after, a batch with lines on its
	// way to the server, were acknowledged.
	PendingRawAfter(dst []byte, after batch, maxLines, maxBytes int) (batch, error)
}

// runMeta names a step run: the claim it came from and the id that numbers
// its lines for the server.
type runMeta struct {
	Run      string `json:"run"`
	JobID    string `json:"job_id"`
	Step     string `json:"step_name"`
	WorkerID string `json:"worker_id"`
	// Secret proves WorkerID's reports (see Prover): kept in the spool
	// (a directory only its owner reads) so a restarted worker still
	// delivers the run as the worker that ran it.
	Secret  string    `json:"worker_secret,omitempty"`
	Created time.Time `json:"created"`
}

// randomID is a random hex id: a run's.
func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// dropNotice is the one line standing for the lines a journal dropped.
func dropNotice(n int, why string) LogLine {
	return LogLine{TS: time.Now().UTC(), Stream: runners.Stderr,
		Line: fmt.Sprintf("[appliance worker: %d log lines dropped: %s]", n, why)}
}

// stoppedWhileFull is why a journal drops lines: the step was being killed
// while its output waited for room, and its reader must not hold the kill.
func stoppedWhileFull(ctx context.Context) string {
	return fmt.Sprintf("the step was being stopped (%v) while its output waited for the server to take earlier lines", context.Cause(ctx))
}

// waitRoom waits, with mu released, for freed (true) or the end of ctx
// (false), after telling delivery a writer waits.
func waitRoom(ctx context.Context, mu *sync.Mutex, rm *room, freed <-chan struct{}) bool {
	rm.waiting()
	mu.Unlock()
	defer mu.Lock()
	select {
	case <-freed:
		return true
	case <-ctx.Done():
		return false
	}
}

// Bounds of a memory journal: past either, the step's output waits for
// delivery. The in-process pool delivers as fast as the log file takes
// lines, so they only pace a step that prints faster than that.
const (
	maxMemoryLines = 100_000
	// DefaultLogBuffer is the default bytes bound of a memory journal.
	DefaultLogBuffer = 8 << 20
	// lineOverhead is what a held line costs beyond its text.
	lineOverhead = 64
)

// memJournal is a journal in memory.
type memJournal struct {
	meta     runMeta
	log      *slog.Logger
	maxBytes int64
	room     *room

	mu      sync.Mutex
	lines   []LogLine // undelivered, oldest first
	size    int64     // bytes of lines, with lineOverhead each
	seq     int64     // number of the last line appended
	dropped int       // lines dropped since the last notice
	why     string    // why they were dropped
	res     *Result
}

// newMemJournal begins a memory journal holding at most maxBytes
// (DefaultLogBuffer if not positive) and maxMemoryLines lines.
func newMemJournal(meta runMeta, log *slog.Logger, maxBytes int64) *memJournal {
	if maxBytes <= 0 {
		maxBytes = DefaultLogBuffer
	}
	return &memJournal{meta: meta, log: log, maxBytes: maxBytes, room: newRoom()}
}

func (j *memJournal) Meta() runMeta { return j.meta }

func (j *memJournal) Wanted() <-chan struct{} { return j.room.want() }

func (j *memJournal) Log(ctx context.Context, stream, line string) {
	ts := time.Now().UTC()
	cost := int64(len(line)) + lineOverhead
	j.mu.Lock()
	defer j.mu.Unlock()
	for {
		if j.res != nil {
			return
		}
		freed := j.room.next()
		// An empty journal takes any line: one line is at most runners.MaxLine.
		if len(j.lines) == 0 || len(j.lines) < maxMemoryLines && j.size+cost <= j.maxBytes {
			break
		}
		if ctx.Err() != nil || !waitRoom(ctx, &j.mu, j.room, freed) {
			if j.dropped == 0 {
				j.why = stoppedWhileFull(ctx)
				j.log.Warn("step stopped while its log waited for delivery: dropping its last lines",
					"job_id", j.meta.JobID, "step", j.meta.Step, "cause", context.Cause(ctx))
			}
			j.dropped++
			return
		}
	}
	j.noticeLocked()
	j.add(LogLine{TS: ts, Stream: stream, Line: line})
}

func (j *memJournal) add(l LogLine) {
	j.seq++
	l.Seq = j.seq
	j.lines = append(j.lines, l)
	j.size += int64(len(l.Line)) + lineOverhead
	if len(j.lines) == maxPushLines {
		j.room.waiting() // a full push waits: see maxPushLines
	}
}

// noticeLocked appends the notice of dropped lines, if any were.
func (j *memJournal) noticeLocked() {
	if j.dropped > 0 {
		j.add(dropNotice(j.dropped, j.why))
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
	for _, l := range j.lines[:i] {
		j.size -= int64(len(l.Line)) + lineOverhead
	}
	// Resliced, not copied: a copy of the rest at each push costs the
	// length of the buffer per push. The acked entries are cleared so
	// their text is freed; append reallocates as the start moves up.
	clear(j.lines[:i])
	j.lines = j.lines[i:]
	if i > 0 {
		j.room.free()
	}
	return nil
}

// Flush does nothing: a memory journal holds every line alike.
func (j *memJournal) Flush() {}

// Persist does nothing: a memory journal dies with its process.
func (j *memJournal) Persist() error { return nil }

func (j *memJournal) Remove() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines, j.size = nil, 0
	j.room.free()
}
