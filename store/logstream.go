package store

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/appliance-sh/appliance/engine"
)

// Subscribe returns the job's log so far, or the part of it q selects
// (its Tail or the lines After a line; q.Step is ignored: the stream is the
// whole job's), and a channel of every chunk appended after it, with no
// gap and no duplicate between the two. The
// channel is closed by Finish (after the chunks sent before it), by Close,
// or when the subscriber falls too far behind. Chunks are shared between
// subscribers: do not modify them. cancel unregisters and may be called
// more than once.
//
// A job that is already finished gets its backfill and a channel nobody
// will close, so callers subscribe first and then check whether the job is
// terminal: if it is, the backfill is the whole log.
func (l *Logs) Subscribe(jobID string, q engine.LogQuery) (backfill []byte, updates <-chan []byte, cancel func(), err error) {
	if err := validJobID(jobID); err != nil {
		return nil, nil, nil, fmt.Errorf("subscribe to log: %w", err)
	}
	jl := l.lock(jobID)
	defer l.release(jobID, jl)
	// Under the job lock no append can land between this read and the
	// registration below.
	backfill, err = l.backfill(jobID, q)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("subscribe to log of job %s: %w", jobID, err)
	}
	s := &subscriber{ch: make(chan []byte, l.subBuffer)}
	jl.subs[s] = struct{}{}
	var once sync.Once
	cancel = func() { once.Do(func() { l.unsubscribe(jobID, jl, s) }) }
	return backfill, s.ch, cancel, nil
}

func (l *Logs) unsubscribe(jobID string, jl *jobLog, s *subscriber) {
	jl.mu.Lock()
	if jl.closed {
		jl.mu.Unlock()
		return // Finish or Close already closed the channel
	}
	if _, ok := jl.subs[s]; ok {
		delete(jl.subs, s)
		close(s.ch)
	}
	l.release(jobID, jl)
}

// backfill reads the part of the job's log a new subscriber starts with.
func (l *Logs) backfill(jobID string, q engine.LogQuery) ([]byte, error) {
	q.Step = ""
	if q == (engine.LogQuery{}) {
		return l.readFile(jobID)
	}
	var buf bytes.Buffer
	_, err := l.ReadLog(context.Background(), jobID, q, &buf)
	return buf.Bytes(), err
}
