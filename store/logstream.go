package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/appliance-sh/appliance/engine"
)

// Subscribe returns the job's log so far, or the part of it q selects (its
// Tail or the lines After a line; q.Step is ignored: the stream is the
// whole job's), and a channel of every chunk appended after it, with no
// gap and no duplicate between the two. The backfill is read from the
// medium as the caller reads it, so a big log costs no memory; the caller
// closes it. The channel is closed by Finish (after the chunks sent before
// it), by Close, or when the subscriber falls too far behind. Chunks are
// shared between subscribers: do not modify them. cancel unregisters and
// may be called more than once.
//
// A job that is already finished gets its backfill and a channel nobody
// will close, so callers subscribe first and then check whether the job is
// terminal: if it is, the backfill is the whole log.
func (h *LogHub) Subscribe(jobID string, q engine.LogQuery) (backfill io.ReadCloser, updates <-chan []byte, cancel func(), err error) {
	if err := ValidJobID(jobID); err != nil {
		return nil, nil, nil, fmt.Errorf("subscribe to log: %w", err)
	}
	jl := h.lock(jobID)
	// Under the job lock no append can land between fixing the end of the
	// backfill and the registration below.
	backfill, err = h.medium.Backfill(jobID, q)
	if err != nil {
		h.release(jobID, jl)
		return nil, nil, nil, fmt.Errorf("subscribe to log of job %s: %w", jobID, err)
	}
	s := &subscriber{ch: make(chan []byte, h.subBuffer)}
	jl.subs[s] = struct{}{}
	var once sync.Once
	cancel = func() { once.Do(func() { h.unsubscribe(jobID, jl, s) }) }
	h.release(jobID, jl)
	return backfill, s.ch, cancel, nil
}

// Backfill reads the job's file up to its last whole line. The file only
// grows, so the backfill's bytes stay as they are once the job's lock is
// released.
func (m logFiles) Backfill(jobID string, q engine.LogQuery) (io.ReadCloser, error) {
	f, end, err := m.l.openLocal(jobID)
	if err != nil {
		return nil, err
	}
	if f == nil {
		return io.NopCloser(strings.NewReader("")), nil
	}
	start, err := backfillStart(f, end, q)
	if err != nil {
		f.Close()
		return nil, err
	}
	return fileSection{io.NewSectionReader(f, start, end-start), f}, nil
}

// fileSection reads part of a file and closes the file.
type fileSection struct {
	*io.SectionReader
	f *os.File
}

func (s fileSection) Close() error { return s.f.Close() }

// backfillStart is where the part of the first end bytes of f that q
// selects begins: after q.After lines, or q.Tail lines before the end.
func backfillStart(f io.ReaderAt, end int64, q engine.LogQuery) (int64, error) {
	switch {
	case q.Tail > 0:
		start, _, err := tailStart(f, end, q.Tail)
		return start, err
	case q.After > 0:
		return lineOffset(f, end, q.After)
	}
	return 0, nil
}

// lineOffset is where line n+1 of the first end bytes of f begins (end
// when there are no more lines).
func lineOffset(f io.ReaderAt, end int64, n int) (int64, error) {
	buf := make([]byte, readBlock)
	for pos := int64(0); pos < end; {
		size, err := f.ReadAt(buf[:min(int64(len(buf)), end-pos)], pos)
		if err != nil && err != io.EOF {
			return 0, err
		}
		block := buf[:size]
		for {
			i := bytes.IndexByte(block, '\n')
			if i < 0 {
				break
			}
			n--
			if n == 0 {
				return pos + int64(size-len(block)+i+1), nil
			}
			block = block[i+1:]
		}
		pos += int64(size)
		if size == 0 {
			break
		}
	}
	return end, nil
}

func (h *LogHub) unsubscribe(jobID string, jl *jobLog, s *subscriber) {
	jl.mu.Lock()
	if jl.closed {
		jl.mu.Unlock()
		return // Finish or Close already closed the channel
	}
	if _, ok := jl.subs[s]; ok {
		delete(jl.subs, s)
		close(s.ch)
	}
	h.release(jobID, jl)
}

// PipeRead runs read in the background and returns what it writes as a
// reader; closing the reader stops it.
func PipeRead(ctx context.Context, read func(ctx context.Context, w io.Writer) error) io.ReadCloser {
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		pw.CloseWithError(read(ctx, pw))
	}()
	return pipeReader{pr, cancel}
}

type pipeReader struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (p pipeReader) Close() error {
	p.cancel()
	return p.PipeReader.Close()
}
