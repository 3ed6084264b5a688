package dispatch

import (
	"sync"

	"github.com/appliance-sh/appliance/api/workerproto"
)

// maxLineSeqRuns bounds how many steps' line numbers are remembered; past
// it an arbitrary one is forgotten (a step's record goes when its result
// comes, so only steps that never report fill it). Each costs about a
// hundred bytes.
const maxLineSeqRuns = 1 << 16

// lineSeqs remembers, per step, the run that last pushed numbered lines and
// the number of the last line appended, so a push repeated because its
// answer was lost appends only the lines the log lacks. It lives in memory:
// a server killed between appending a push and answering it has those
// lines twice in the log once the worker repeats the push to the new
// process; a graceful stop answers every push it appended.
type lineSeqs struct {
	mu    sync.Mutex
	steps map[lineSeqKey]*lineSeq
}

type lineSeqKey struct{ job, step string }

type lineSeq struct {
	mu   sync.Mutex // held across the append, so repeats of a push wait for it
	run  string
	last int64
}

func newLineSeqs() *lineSeqs {
	return &lineSeqs{steps: map[lineSeqKey]*lineSeq{}}
}

// appendNew calls appendFn with the pushed lines the log does not have
// yet: all of them without a run, else those numbered after the last one
// appended for the run (a new run of the step starts afresh).
func (ls *lineSeqs) appendNew(job, step, run string, lines []workerproto.LogLine, appendFn func([]workerproto.LogLine) error) error {
	if run == "" {
		return appendFn(lines)
	}
	s := ls.get(lineSeqKey{job, step})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run != run {
		s.run, s.last = run, 0
	}
	fresh := lines[:0:0]
	last := s.last
	for _, l := range lines {
		if l.Seq == 0 || l.Seq > last {
			fresh = append(fresh, l)
			last = max(last, l.Seq)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	if err := appendFn(fresh); err != nil {
		return err
	}
	s.last = last
	return nil
}

func (ls *lineSeqs) get(k lineSeqKey) *lineSeq {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if s, ok := ls.steps[k]; ok {
		return s
	}
	if len(ls.steps) >= maxLineSeqRuns {
		for old := range ls.steps {
			delete(ls.steps, old)
			break
		}
	}
	s := &lineSeq{}
	ls.steps[k] = s
	return s
}

// forget drops a step's record once its result is in: no line follows.
func (ls *lineSeqs) forget(job, step string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	delete(ls.steps, lineSeqKey{job, step})
}
