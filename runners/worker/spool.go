package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Spool keeps a remote worker's step runs on disk until the server has
// them, so no log line or result is lost however long the server is away,
// nor when the worker restarts meanwhile.
//
// Layout: one directory per step run, named by its run id, holding
// run.json (the run's job, step and worker id), numbered segment files of
// JSON records (lines numbered from 1, then the result) and `acked`, the
// number of the last line the server acknowledged. Segments the server has
// wholly are removed as delivery goes, and the run's directory once its
// result is delivered. The bound counts what the server does not have yet:
// a run's writer that finds it full waits for delivery to free room (see
// room), so a full spool slows the step instead of losing its lines.
// Records are written without fsync (the result is synced when the server
// does not take it at once), a group in one call: a run holds its lines in
// memory until its step's output reader has passed on all it read (see
// spoolRun.buf). A worker process killed loses only lines held so, which
// were no safer in the reader's buffer or the pipe; a machine crash may
// cut the tail, which the next start drops.
type Spool struct {
	dir  string
	max  int64
	log  *slog.Logger
	lock *os.File
	used atomic.Int64 // bytes of undelivered records
	// segMax is the size at which a run's segment is closed and a new one
	// begun, so delivered lines leave the disk while a long step runs.
	segMax int64
	room   *room
	// write writes a run's records to its segment: (*os.File).Write, or
	// a test's, to count or fail the calls.
	write func(f *os.File, p []byte) (int, error)

	// The runs log (see spoolruns.go) and the runs alive in it.
	runsMu   sync.Mutex
	runs     *os.File
	runsSize int64
	live     map[string]*liveRun
}

// DefaultSpoolMax bounds a spool when its config says nothing.
const DefaultSpoolMax = 1 << 30

// segmentMax is the largest segment; a small spool has segments of an
// eighth of its bound, so delivered lines leave its disk soon.
const segmentMax = 4 << 20

// OpenSpool opens (creating it if needed) the spool at dir, bounded to max
// bytes of records, and locks it: two worker processes sharing a spool
// would deliver each other's runs.
func OpenSpool(dir string, max int64, log *slog.Logger) (*Spool, error) {
	if max <= 0 {
		max = DefaultSpoolMax
	}
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spool_dir: create %s: %w", dir, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s := &Spool{dir: dir, max: max, log: log, lock: lock, segMax: min(segmentMax, max/8+1), room: newRoom(), live: map[string]*liveRun{}}
	if err := s.openRunsLog(); err != nil {
		lock.Close()
		return nil, err
	}
	// What an earlier process left stays in the runs log until recovered
	// and delivered, even if runs of this one come and go first.
	logged, err := s.readRunsLog()
	if err != nil {
		log.Error("spool: cannot read the runs log", "err", err)
	}
	for id, r := range logged {
		s.live[id] = &liveRun{meta: r.meta, res: r.res}
	}
	runs, _ := os.ReadDir(dir)
	for _, r := range runs {
		if r.IsDir() {
			s.used.Add(segmentBytes(filepath.Join(dir, r.Name())))
		}
	}
	return s, nil
}

// Close releases the spool's lock; what it holds stays for the next start.
func (s *Spool) Close() error {
	s.runsMu.Lock()
	s.runs.Close()
	s.runsMu.Unlock()
	return s.lock.Close()
}

// reserve takes n bytes of the bound; false when they do not fit. An
// empty spool takes any record, so a line longer than the bound cannot
// stop a step for good.
func (s *Spool) reserve(n int64) bool {
	if used := s.used.Add(n); used > s.max && used != n {
		s.used.Add(-n)
		return false
	}
	return true
}

func (s *Spool) writeSegment(f *os.File, p []byte) (int, error) {
	if s.write != nil {
		return s.write(f, p)
	}
	return f.Write(p)
}

// release gives back n bytes the server now has, waking waiting writers.
func (s *Spool) release(n int64) {
	if n > 0 {
		s.used.Add(-n)
		s.room.free()
	}
}

// create begins a new run, in the runs log: its directory comes with its
// first line (see makeDir).
func (s *Spool) create(meta runMeta) (*spoolRun, error) {
	r := &spoolRun{sp: s, dir: filepath.Join(s.dir, meta.Run), meta: meta}
	if err := s.appendRuns(runsRecord{Begin: &meta}); err != nil {
		return nil, fmt.Errorf("spool: create run of %s/%s: %w", meta.JobID, meta.Step, err)
	}
	return r, nil
}

// makeDir gives a run its directory, for its lines.
func (s *Spool) makeDir(r *spoolRun) error {
	if err := os.Mkdir(r.dir, 0o700); err != nil {
		return fmt.Errorf("spool: create run of %s/%s: %w", r.meta.JobID, r.meta.Step, err)
	}
	if err := writeFileAtomic(filepath.Join(r.dir, runFile), mustJSON(r.meta)); err != nil {
		_ = os.RemoveAll(r.dir)
		return fmt.Errorf("spool: create run of %s/%s: %w", r.meta.JobID, r.meta.Step, err)
	}
	r.hasDir = true
	return nil
}

// recover loads the runs a previous worker process left, oldest first.
// A run directory that cannot be read is removed with a warning.
func (s *Spool) recover() []*spoolRun {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		s.log.Error("spool: cannot list undelivered step runs", "dir", s.dir, "err", err)
		return nil
	}
	logged, err := s.readRunsLog()
	if err != nil {
		s.log.Error("spool: cannot read the runs log", "err", err)
	}
	var runs []*spoolRun
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(s.dir, e.Name())
		r, err := s.load(dir)
		if err != nil {
			s.log.Warn("spool: dropping an unreadable step run", "dir", dir, "err", err)
			s.used.Add(-segmentBytes(dir))
			s.removeDir(dir)
			continue
		}
		if l := logged[r.meta.Run]; l != nil && r.res == nil {
			r.res = l.res // finished before its directory was written whole
		}
		delete(logged, r.meta.Run)
		runs = append(runs, r)
	}
	for _, r := range logged { // runs without lines
		runs = append(runs, r)
	}
	// The runs log now holds what is alive, as this process knows it.
	s.runsMu.Lock()
	for _, r := range runs {
		s.live[r.meta.Run] = &liveRun{meta: r.meta, res: r.res}
	}
	if err := s.compactRunsLocked(); err != nil {
		s.log.Warn("spool: cannot compact the runs log", "err", err)
	}
	s.runsMu.Unlock()
	sort.Slice(runs, func(i, j int) bool { return runs[i].meta.Created.Before(runs[j].meta.Created) })
	return runs
}

// segmentBytes is the size of a run directory's segments.
func segmentBytes(dir string) int64 {
	var n int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if _, ok := segmentNum(e.Name()); ok {
			if info, err := e.Info(); err == nil {
				n += info.Size()
			}
		}
	}
	return n
}

// removeDir removes a run's directory; its bytes are given back by the
// caller.
func (s *Spool) removeDir(dir string) {
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("spool: cannot remove a delivered step run", "dir", dir, "err", err)
	}
}
