package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/appliance-sh/appliance/engine/jsonstr"
	"github.com/appliance-sh/appliance/runners"
)

// Files of a run's directory in the spool.
const (
	runFile   = "run.json"
	ackedFile = "acked"
	segSuffix = ".seg"
)

// record is one line of a segment: a log line, or the run's result.
type record struct {
	Seq    int64     `json:"seq,omitempty"`
	TS     time.Time `json:"ts"`
	Stream string    `json:"stream,omitempty"`
	Line   string    `json:"line,omitempty"`
	Result *Result   `json:"result,omitempty"`
}

// recentLine is a line in spoolRun.recent.
type recentLine struct {
	seq int64
	to  int64    // just past its element and comma in recentBuf, from recentBase
	end spoolPos // just past its record
}

// maxRecentBytes bounds the lines a run keeps in memory for delivery;
// past it delivery reads the spool.
const maxRecentBytes = 4 << 20

// spoolPos is where delivery stands: a segment and an offset in it.
type spoolPos struct {
	seg int
	off int64
}

// segment is one of a run's files of records.
type segment struct {
	num  int
	size int64 // bytes of whole records, with those staged for it
	last int64 // number of its last line (0: none), known after a restart
	// sealed is set when a failed write could not be cut off: what
	// follows goes to a new segment, not after a record cut short.
	sealed bool
}

// maxGroup bounds the records a run stages in memory before it writes
// them out (see spoolRun.buf).
const maxGroup = 64 << 10

// spoolRun is a journal in the spool.
type spoolRun struct {
	sp   *Spool
	dir  string
	meta runMeta

	mu      sync.Mutex
	segs    []*segment // oldest first; the last is the one written
	w       *os.File   // the last segment, open for appending (nil: none yet)
	seq     int64      // number of the last line written
	acked   int64      // number of the last line the server has
	dropped int        // lines dropped since the last notice
	why     string     // why they were dropped
	res     *Result
	synced  bool // the result is on disk to stay (see Persist)
	removed bool
	// hasDir is set once the run has a directory of its own: from its
	// first line (see the runs log).
	hasDir bool
	// recent holds the undelivered lines most recently written, with where
	// each ends on disk, while they follow the last acknowledged line
	// without a gap: Pending serves them from memory rather than reading
	// the segments back (see remember). recentBuf holds their records as
	// a push carries them, each followed by a comma, the first at its
	// start; recentBase counts the bytes it dropped before that.
	recent     []recentLine
	recentBuf  []byte
	recentBase int64
	recentArr  []byte   // recentBuf's whole array
	pos        spoolPos // where the next batch starts

	// buf holds the records staged for the last segment, written out in
	// one call at a flush point (flushLocked) rather than one call a line,
	// which was most of the spool's time. Sizes, positions and the
	// spool's bound count them as written. The flush points: the step's
	// output reader read all it had (Flush; until then the lines are no
	// worse off here than in its buffer or the pipe), maxGroup, a full
	// segment, a writer about to wait for room, Pending (nothing is
	// delivered before it is written, so a failed write concerns only
	// lines the server never saw), Finish and Persist; Remove drops them.
	buf []byte
	// bufLines is how many of the step's lines buf stands for (a notice of
	// dropped lines stands for those), and flushedSeq the number of the
	// last line written out: a failed write rolls the numbering back to
	// it and counts bufLines as dropped, under one notice.
	bufLines   int
	flushedSeq int64
	// rec is Log's record, kept for the next: growing a new one each line
	// cost more than coding it; times remembers its time's second.
	rec   []byte
	times jsonstr.Times
}

func (r *spoolRun) Meta() runMeta { return r.meta }

func (r *spoolRun) Wanted() <-chan struct{} { return r.sp.room.want() }

func (r *spoolRun) Log(ctx context.Context, stream, line string) {
	ts := time.Now().UTC()
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.rec
	defer func() {
		if cap(rec) <= maxGroup {
			r.rec = rec[:0]
		}
	}()
	for {
		if r.res != nil || r.removed {
			return
		}
		freed := r.sp.room.next()
		// Numbered here: the other stream's reader may add lines meanwhile.
		seq := r.seq + 1 + int64(min(r.dropped, 1))
		rec = appendLineRecord(rec[:0], &r.times, seq, ts, stream, line)
		if r.sp.reserve(int64(len(rec))) {
			break
		}
		if ctx.Err() != nil {
			r.drop(1, stoppedWhileFull(ctx), nil)
			return
		}
		// The wait may be long: the lines staged wait on disk. A failed
		// write gives back room and moves the numbering: try again.
		if r.flushLocked() != nil {
			continue
		}
		if !waitRoom(ctx, &r.mu, r.sp.room, freed) {
			r.drop(1, stoppedWhileFull(ctx), nil)
			return
		}
	}
	if err := r.noticeLocked(); err != nil {
		r.sp.used.Add(-int64(len(rec)))
		r.drop(1, "", err)
		return
	}
	if err := r.stage(rec, 1); err != nil {
		r.sp.used.Add(-int64(len(rec)))
		r.drop(1, "", err)
		return
	}
	if len(r.buf) >= maxGroup || r.segs[len(r.segs)-1].size >= r.sp.segMax {
		_ = r.flushLocked()
	}
}

func (r *spoolRun) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.flushLocked()
}

// remember keeps a line just staged, numbered seq, with its record rec,
// in recent, if recent reaches back to the last acknowledged line and has
// room; a line that does not fit empties it, so Pending reads the spool
// until delivery catches up.
func (r *spoolRun) remember(seq int64, rec []byte) {
	if len(r.recent) == 0 && seq != r.acked+1 {
		return // delivery is behind, reading the spool
	}
	if len(r.recentBuf)+len(rec) > maxRecentBytes {
		r.forgetRecent(0)
		return
	}
	if len(r.recentBuf)+len(rec) > cap(r.recentBuf) && cap(r.recentBuf) < cap(r.recentArr) {
		// What delivery took is cut from the front (recentBuf runs to the
		// array's end, so it starts cap(recentArr)-cap(recentBuf) in):
		// slide the rest back rather than grow a new array, which cost a
		// copy of the whole window every few pushes.
		r.recentBuf = r.recentArr[:copy(r.recentArr, r.recentBuf)]
	}
	r.recentBuf = append(append(r.recentBuf, rec[:len(rec)-1]...), ',')
	if cap(r.recentBuf) > cap(r.recentArr) {
		r.recentArr = r.recentBuf[:cap(r.recentBuf)]
	}
	s := r.segs[len(r.segs)-1]
	r.recent = append(r.recent, recentLine{seq: seq, to: r.recentBase + int64(len(r.recentBuf)), end: spoolPos{seg: s.num, off: s.size}})
}

// forgetRecent keeps the first n lines of recent.
func (r *spoolRun) forgetRecent(n int) {
	to := r.recentBase
	if n > 0 {
		to = r.recent[n-1].to
	}
	r.recentBuf = r.recentBuf[:to-r.recentBase]
	clear(r.recent[n:])
	r.recent = r.recent[:n]
}

// ackRecent drops the lines of recent up to seq, delivered.
func (r *spoolRun) ackRecent(seq int64) {
	i := 0
	for i < len(r.recent) && r.recent[i].seq <= seq {
		i++
	}
	if i == 0 {
		return
	}
	cut := r.recent[i-1].to - r.recentBase
	r.recentBuf = r.recentBuf[cut:]
	r.recentBase += cut
	r.recent = r.recent[:copy(r.recent, r.recent[i:])] // kept in place: see remember
}

// drop counts n lines the spool could not take, why (or err, a failed
// write), and says so in the worker's log at the first.
func (r *spoolRun) drop(n int, why string, err error) {
	if err != nil {
		why = "the worker could not write its spool: " + err.Error()
	}
	if r.dropped == 0 {
		attrs := []any{"job_id", r.meta.JobID, "step", r.meta.Step, "spool_dir", r.sp.dir}
		if err != nil {
			r.sp.log.Error("spool: cannot write the step's log: dropping its lines", append(attrs, "err", err)...)
		} else {
			r.sp.log.Warn("spool: step stopped while its log waited for delivery: dropping its last lines", attrs...)
		}
		r.why = why
	}
	r.dropped += n
}

// noticeLocked stages the one line standing for the dropped ones, beyond
// the bound if need be (it is short).
func (r *spoolRun) noticeLocked() error {
	if r.dropped == 0 {
		return nil
	}
	n := dropNotice(r.dropped, r.why)
	rec := encodeRecord(record{TS: n.TS, Stream: n.Stream, Line: n.Line}, r.seq+1)
	r.sp.used.Add(int64(len(rec)))
	if err := r.stage(rec, r.dropped); err != nil {
		r.sp.used.Add(-int64(len(rec)))
		return err
	}
	r.sp.log.Warn("spool: log lines were dropped", "job_id", r.meta.JobID, "step", r.meta.Step, "dropped", r.dropped, "why", r.why)
	r.dropped, r.why = 0, ""
	return nil
}

func (r *spoolRun) Finish(res Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.res != nil || r.removed {
		return
	}
	// The lines first, so that a failed write is told by the notice.
	_ = r.flushLocked()
	if err := r.noticeLocked(); err != nil {
		r.sp.log.Error("spool: cannot write the notice of dropped lines", "job_id", r.meta.JobID, "step", r.meta.Step, "err", err)
	}
	r.res = &res
	if !r.hasDir {
		// A run without lines keeps its result in the runs log.
		if err := r.sp.appendRuns(runsRecord{Run: r.meta.Run, Result: &res}); err != nil {
			r.sp.log.Error("spool: cannot write the step's result", "job_id", r.meta.JobID, "step", r.meta.Step, "err", err)
		}
		return
	}
	rec := encodeRecord(record{TS: time.Now().UTC(), Result: &res}, 0)
	r.sp.used.Add(int64(len(rec)))
	// Not synced: a killed worker process loses nothing (the page cache
	// keeps it), and the result goes to the server at once; only if the
	// server does not take it does delivery sync it (Persist).
	err := r.stage(rec, 0)
	if err != nil {
		r.sp.used.Add(-int64(len(rec)))
	} else {
		err = r.flushLocked()
	}
	if err != nil {
		// Delivered from memory while this process lives.
		r.sp.log.Error("spool: cannot write the step's result", "job_id", r.meta.JobID, "step", r.meta.Step, "err", err)
	}
	if r.w != nil {
		_ = r.w.Close()
		r.w = nil
	}
}

// stage appends one record to the group for the last segment, beginning
// a new segment when that one is full: rec is a line's, numbered next,
// standing for lines of the step (a notice stands for several), or, with
// lines 0, the result. The bytes are reserved by the caller.
func (r *spoolRun) stage(rec []byte, lines int) error {
	if !r.hasDir {
		if err := r.sp.makeDir(r); err != nil {
			return err
		}
	}
	// A group never spans segments: it is written out once its segment
	// is full (see Log).
	if n := len(r.segs); n == 0 || r.w == nil || len(r.buf) == 0 && (r.segs[n-1].size >= r.sp.segMax || r.segs[n-1].sealed) {
		if err := r.nextSegment(); err != nil {
			return err
		}
	}
	r.buf = append(r.buf, rec...)
	r.segs[len(r.segs)-1].size += int64(len(rec))
	r.bufLines += lines
	if lines > 0 {
		r.seq++
		r.remember(r.seq, rec)
		if r.seq-r.acked == maxPushLines {
			r.sp.room.waiting() // a full push waits: see maxPushLines
		}
	}
	return nil
}

// flushLocked writes the staged records out in one call. A write that
// fails is cut off, so the file holds whole records, and the lines of the
// group are dropped, told by the notice that comes next: Pending writes
// out before it hands out a line, so none of them reached the server, and
// their numbers are given again to what follows (nothing lost silently,
// nothing numbered twice). If the file cannot be cut, what the failed write
// left in it may hold whole records: their numbers are not given again,
// and the segment takes no more.
func (r *spoolRun) flushLocked() error {
	if len(r.buf) == 0 {
		return nil
	}
	s := r.segs[len(r.segs)-1]
	_, err := r.sp.writeSegment(r.w, r.buf)
	if err == nil {
		r.flushedSeq = r.seq
		r.bufLines = 0
		if cap(r.buf) > 4*maxGroup {
			r.buf = nil // one long line's group: not kept for the next
		} else {
			r.buf = r.buf[:0]
		}
		return nil
	}
	s.size -= int64(len(r.buf))
	r.sp.used.Add(-int64(len(r.buf)))
	i := len(r.recent)
	for i > 0 && r.recent[i-1].seq > r.flushedSeq {
		i--
	}
	r.forgetRecent(i)
	if terr := r.w.Truncate(s.size); terr == nil {
		r.seq = r.flushedSeq
	} else {
		s.sealed = true
		r.flushedSeq = r.seq
	}
	lost := r.bufLines
	r.buf, r.bufLines = r.buf[:0], 0
	if lost > 0 {
		r.drop(lost, "", err)
	}
	return err
}

func (r *spoolRun) nextSegment() error {
	num := 1
	if n := len(r.segs); n > 0 {
		num = r.segs[n-1].num + 1
		// The last segment may be reopened after a restart rather than full.
		if r.w == nil && r.segs[n-1].size < r.sp.segMax && !r.segs[n-1].sealed {
			f, err := os.OpenFile(segmentPath(r.dir, r.segs[n-1].num), os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				return fmt.Errorf("reopen spool segment: %w", err)
			}
			r.w = f
			return nil
		}
	}
	f, err := os.OpenFile(segmentPath(r.dir, num), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("create spool segment: %w", err)
	}
	if r.w != nil {
		_ = r.w.Close()
	}
	r.w = f
	r.segs = append(r.segs, &segment{num: num})
	return nil
}

func (r *spoolRun) Pending(maxLines, maxBytes int) (batch, error) {
	return r.pending(batcher{maxLines: maxLines, maxBytes: maxBytes}, nil)
}

// PendingRaw is Pending with the lines as a push carries them: the
// records of the spool, which are in that form, pass as they are.
func (r *spoolRun) PendingRaw(dst []byte, maxLines, maxBytes int) (batch, error) {
	return r.pending(batcher{b: batch{raw: dst[:0]}, maxLines: maxLines, maxBytes: maxBytes, raw: true}, nil)
}

func (r *spoolRun) PendingRawAfter(dst []byte, after batch, maxLines, maxBytes int) (batch, error) {
	return r.pending(batcher{b: batch{raw: dst[:0]}, maxLines: maxLines, maxBytes: maxBytes, raw: true}, &after)
}

func (r *spoolRun) pending(g batcher, after *batch) (batch, error) {
	r.mu.Lock()
	// Written out first, in the same hold of the lock: the disk holds
	// every line handed out (see flushLocked).
	_ = r.flushLocked()
	pos, acked := r.pos, r.acked
	if after != nil {
		pos, acked = after.end, after.lastSeq()
	}
	if b, ok := r.pendingRecent(g, acked); ok {
		r.mu.Unlock()
		return b, nil
	}
	segs := make([]segment, len(r.segs))
	for i, s := range r.segs {
		segs[i] = *s
	}
	res := r.res
	r.mu.Unlock()

	g.b.end = pos
	var scratch []byte
	for _, s := range segs {
		if s.num < pos.seg {
			continue
		}
		off := int64(0)
		if s.num == pos.seg {
			off = pos.off
		}
		g.b.end = spoolPos{seg: s.num, off: off}
		if off >= s.size {
			continue
		}
		f, err := os.Open(segmentPath(r.dir, s.num))
		if err != nil {
			return batch{}, fmt.Errorf("read spool segment: %w", err)
		}
		full, err := readRecordLines(io.NewSectionReader(f, off, s.size-off), func(rec []byte) bool {
			if seq, elem := lineOf(rec[:len(rec)-1], &g.times, &scratch); elem != nil && seq > acked && !g.add(seq, elem) {
				return false
			}
			g.b.end.off += int64(len(rec))
			return true
		})
		_ = f.Close()
		if err != nil {
			return batch{}, fmt.Errorf("read spool segment: %w", err)
		}
		if full {
			return g.done(), nil
		}
	}
	g.b.Result = res
	return g.done(), nil
}

// pendingRecent is pending from recent, when it holds the lines to
// deliver after the one numbered acked and the batch ends before the
// result (the last batch, with the result, is read from the spool). r.mu
// is held.
func (r *spoolRun) pendingRecent(g batcher, acked int64) (batch, bool) {
	if len(r.recent) == 0 {
		return batch{}, false
	}
	// The line after acked: recent must reach back to it, the first
	// line or one after a line it holds.
	k := sort.Search(len(r.recent), func(i int) bool { return r.recent[i].seq > acked })
	if k == len(r.recent) || k == 0 && r.recent[0].seq != acked+1 || k > 0 && r.recent[k-1].seq != acked {
		return batch{}, false
	}
	if n := min(len(r.recentBuf), g.maxBytes+runners.MaxLine); g.raw && cap(g.b.raw) < n {
		g.b.raw = make([]byte, 0, n)
	}
	from := r.recentBase
	if k > 0 {
		from = r.recent[k-1].to
	}
	n := k
	for ; n < len(r.recent); n++ {
		l := r.recent[n]
		if !g.add(l.seq, r.recentBuf[from-r.recentBase:l.to-r.recentBase-1]) {
			break
		}
		from = l.to
	}
	if n == len(r.recent) && (r.res != nil || r.dropped > 0) {
		return batch{}, false
	}
	g.b.end = r.recent[n-1].end
	return g.done(), true
}

// batcher gathers a batch's lines, at most maxLines of at most maxBytes
// of records in all (at least one), as records (raw) or decoded.
type batcher struct {
	b                  batch
	size               int
	maxLines, maxBytes int
	raw                bool
	times              jsonstr.Times // of the records read
}

// add adds the line numbered seq whose record is elem, without its
// newline; false, adding nothing, when the batch is full.
func (g *batcher) add(seq int64, elem []byte) bool {
	if n := g.b.lines(); n == g.maxLines || n > 0 && g.size+len(elem) > g.maxBytes {
		return false
	}
	g.size += len(elem)
	if g.raw {
		g.b.raw = append(append(g.b.raw, elem...), ',')
		g.b.n++
		g.b.last = seq
		return true
	}
	var rec record
	if decodeRecord(elem, &g.times, &rec) { // elem is a line's record: it does
		g.b.Lines = append(g.b.Lines, LogLine{Seq: seq, TS: rec.TS, Stream: rec.Stream, Line: rec.Line})
	}
	return true
}

func (g *batcher) done() batch {
	if g.b.n > 0 {
		g.b.raw = g.b.raw[:len(g.b.raw)-1] // the last comma
	} else if g.raw {
		g.b.raw = g.b.raw[:0:0] // no lines; a dst given stays the caller's
	}
	return g.b
}

// lineOf is the number and the record, as a push carries it, of the line
// whose record is rec (without its newline); a nil record for what is no
// numbered line: the result, or a record that does not decode (skipped).
// A record in another form than appendLineRecord's is coded again into
// scratch.
func lineOf(rec []byte, times *jsonstr.Times, scratch *[]byte) (int64, []byte) {
	if p, ok := parseLineRecord(rec, times); ok {
		return p.seq, rec
	}
	var d record
	if !decodeRecord(rec, times, &d) || d.Result != nil || d.Seq <= 0 {
		return 0, nil
	}
	*scratch = appendLineRecord((*scratch)[:0], times, d.Seq, d.TS, d.Stream, d.Line)
	return d.Seq, (*scratch)[:len(*scratch)-1]
}

// readRecords calls f with each whole record of rd (rec nil when it does
// not decode) until f returns false, which readRecords then returns as
// true ("stopped early").
func readRecords(rd io.Reader, f func(raw []byte, rec *record) bool) (bool, error) {
	var times jsonstr.Times
	return readRecordLines(rd, func(raw []byte) bool {
		var rec record
		p := &rec
		if !decodeRecord(raw, &times, &rec) {
			p = nil
		}
		return f(raw, p)
	})
}

// readRecordLines calls f with each whole line of rd (an unterminated
// tail is no record) until f returns false, which readRecordLines then
// returns as true ("stopped early").
func readRecordLines(rd io.Reader, f func(raw []byte) bool) (bool, error) {
	br := bufio.NewReaderSize(rd, 64<<10)
	for {
		raw, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A record longer than the buffer: gather it whole.
			var long []byte
			long = append(long, raw...)
			for errors.Is(err, bufio.ErrBufferFull) {
				raw, err = br.ReadSlice('\n')
				long = append(long, raw...)
			}
			raw = long
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return false, nil // an unterminated tail is no record
			}
			return false, err
		}
		if !f(raw) {
			return true, nil
		}
	}
}

func (r *spoolRun) Ack(b batch) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.removed {
		return nil
	}
	r.sp.release(r.between(r.pos, b.end))
	r.pos = b.end
	if b.lines() > 0 {
		r.acked = b.lastSeq()
		r.ackRecent(r.acked)
		if err := writeFileAtomic(filepath.Join(r.dir, ackedFile), []byte(strconv.FormatInt(r.acked, 10))); err != nil {
			// Only a restart would send these lines again, and the server
			// skips lines it has.
			r.sp.log.Warn("spool: cannot record delivered lines", "dir", r.dir, "err", err)
		}
	}
	// Segments before the one delivery stands in are delivered whole.
	keep := r.segs[:0]
	for _, s := range r.segs {
		if s.num < r.pos.seg {
			if err := os.Remove(segmentPath(r.dir, s.num)); err == nil || errors.Is(err, os.ErrNotExist) {
				continue
			}
		}
		keep = append(keep, s)
	}
	r.segs = keep
	return nil
}

// Persist syncs the segment holding the result, once.
func (r *spoolRun) Persist() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.res == nil || r.synced || r.removed {
		return nil
	}
	if err := r.flushLocked(); err != nil {
		return fmt.Errorf("spool: write the step's result: %w", err)
	}
	if !r.hasDir || len(r.segs) == 0 {
		if err := r.sp.syncRuns(); err != nil {
			return fmt.Errorf("spool: sync the step's result: %w", err)
		}
		r.synced = true
		return nil
	}
	f, err := os.OpenFile(segmentPath(r.dir, r.segs[len(r.segs)-1].num), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("spool: sync the step's result: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("spool: sync the step's result: %w", err)
	}
	r.synced = true
	return nil
}

func (r *spoolRun) Remove() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.removed {
		return
	}
	r.removed = true
	r.recent, r.recentBuf, r.recentArr = nil, nil, nil
	r.buf, r.bufLines = nil, 0 // their bytes are released with the rest below
	if r.w != nil {
		_ = r.w.Close()
		r.w = nil
	}
	r.sp.release(r.between(r.pos, spoolPos{seg: math.MaxInt}))
	if r.hasDir {
		r.sp.removeDir(r.dir)
	}
	r.segs = nil
	if err := r.sp.appendRuns(runsRecord{End: r.meta.Run}); err != nil {
		r.sp.log.Warn("spool: cannot record a delivered step run", "run", r.meta.Run, "err", err)
	}
}

// between is the bytes of records from one position to another: what the
// server took when delivery moved so.
func (r *spoolRun) between(from, to spoolPos) int64 {
	var n int64
	for _, s := range r.segs {
		if s.num < from.seg || s.num > to.seg {
			continue
		}
		lo, hi := int64(0), s.size
		if s.num == from.seg {
			lo = from.off
		}
		if s.num == to.seg {
			hi = min(hi, to.off)
		}
		n += max(hi-lo, 0)
	}
	return n
}

// load reads a run a previous worker process left: its lines after the
// last acknowledged one and its result, if it has one. A record cut short
// at a segment's end (the process or machine died mid-write) is cut off;
// a record that does not decode elsewhere is skipped.
func (s *Spool) load(dir string) (*spoolRun, error) {
	raw, err := os.ReadFile(filepath.Join(dir, runFile))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", runFile, err)
	}
	r := &spoolRun{sp: s, dir: dir, hasDir: true}
	if err := json.Unmarshal(raw, &r.meta); err != nil || r.meta.JobID == "" || r.meta.Step == "" || r.meta.Run == "" {
		return nil, fmt.Errorf("%s: not a step run (%v)", runFile, err)
	}
	if raw, err := os.ReadFile(filepath.Join(dir, ackedFile)); err == nil {
		r.acked, _ = strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var nums []int
	for _, e := range entries {
		if n, ok := segmentNum(e.Name()); ok {
			nums = append(nums, n)
		}
	}
	sort.Ints(nums)
	skipped := 0
	for _, num := range nums {
		seg, res, bad, err := s.loadSegment(dir, num)
		if err != nil {
			return nil, err
		}
		skipped += bad
		r.seq = max(r.seq, seg.last)
		if res != nil {
			r.res = res
		}
		if seg.last > 0 && seg.last <= r.acked && res == nil {
			// Delivered whole before the restart.
			if err := os.Remove(segmentPath(dir, num)); err == nil {
				s.used.Add(-seg.size)
				continue
			}
		}
		r.segs = append(r.segs, seg)
	}
	if skipped > 0 {
		s.log.Warn("spool: skipped records that do not decode", "dir", dir, "records", skipped)
	}
	r.flushedSeq = r.seq
	if len(r.segs) > 0 {
		r.pos = spoolPos{seg: r.segs[0].num}
	}
	return r, nil
}

// loadSegment scans one segment, cutting off an unterminated tail.
func (s *Spool) loadSegment(dir string, num int) (seg *segment, res *Result, bad int, err error) {
	path := segmentPath(dir, num)
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read spool segment: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, 0, err
	}
	seg = &segment{num: num}
	_, err = readRecords(f, func(raw []byte, rec *record) bool {
		seg.size += int64(len(raw))
		switch {
		case rec == nil:
			bad++
		case rec.Result != nil:
			res = rec.Result
		case rec.Seq > 0:
			seg.last = rec.Seq
		}
		return true
	})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read spool segment: %w", err)
	}
	if tail := info.Size() - seg.size; tail > 0 {
		s.log.Warn("spool: cutting off a record left half-written", "file", path, "bytes", tail)
		if err := os.Truncate(path, seg.size); err != nil {
			return nil, nil, 0, fmt.Errorf("cut the spool segment's half-written tail: %w", err)
		}
		s.used.Add(-tail)
	}
	return seg, res, bad, nil
}

func segmentPath(dir string, num int) string {
	return filepath.Join(dir, fmt.Sprintf("%08d%s", num, segSuffix))
}

func segmentNum(name string) (int, bool) {
	digits, ok := strings.CutSuffix(name, segSuffix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil && n > 0
}

// encodeRecord is rec, numbered seq (0: no number), as one line of JSON.
func encodeRecord(rec record, seq int64) []byte {
	rec.Seq = seq
	raw, err := json.Marshal(rec)
	if err != nil {
		// A result's output holds only JSON values; this cannot happen.
		raw, _ = json.Marshal(record{TS: rec.TS, Seq: seq, Stream: runners.Stderr, Line: "[appliance worker: unencodable record: " + err.Error() + "]"})
	}
	return append(raw, '\n')
}

func mustJSON(v any) []byte {
	raw, _ := json.Marshal(v)
	return raw
}

// writeFileAtomic replaces path's content, so a crash leaves the old or
// the new one.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
