package store

import (
	"fmt"
	"sync"
)

// Subscribe returns the job's log so far and a channel of every chunk
// appended after it, with no gap and no duplicate between the two. The
// channel is closed by Finish (after the chunks sent before it), by Close,
// or when the subscriber falls too far behind. Chunks are shared between
// subscribers: do not modify them. cancel unregisters and may be called
// more than once.
//
// A job that is already finished gets its backfill and a channel nobody
// will close, so callers subscribe first and then check whether the job is
// terminal: if it is, the backfill is the whole log.
func (l *Logs) Subscribe(jobID string) (backfill []byte, updates <-chan []byte, cancel func(), err error) {
	if err := validJobID(jobID); err != nil {
		return nil, nil, nil, fmt.Errorf("subscribe to log: %w", err)
	}
	jl := l.lock(jobID)
	defer l.release(jobID, jl)
	// Under the job lock no append can land between this read and the
	// registration below.
	backfill, err = l.readFile(jobID)
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
