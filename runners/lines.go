package runners

import (
	"bufio"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ReaderGrace bounds the wait for the output pipes to close once the step's
// process group is gone: a descendant that left the group (setsid) may hold
// them open forever. Time the readers spend waiting for room in the step's
// journal does not count (see OutputReaders.Await).
const ReaderGrace = 2 * time.Second

// MaxLine is where a long output line is split: the parts are logged as
// separate lines rather than dropped or held in memory without bound.
const MaxLine = 64 << 10

// lineReaders keeps the readers of finished steps' streams: two buffers
// of MaxLine allocated and cleared for every step, most of which print
// little or nothing, were a tenth of a worker's CPU for a burst of steps.
var lineReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, MaxLine) }}

// readLines sends each line of r to log until EOF or a read error (the pipe
// closed under it once the step is over), and calls flush (if not nil)
// whenever it has passed on all it read: its next read may wait for the
// step, so lines a sink holds back must not wait with it. Until then they
// are no worse off held than the bytes still in the buffer or the pipe.
func readLines(r io.Reader, stream string, log func(stream, line string), flush func()) {
	br := lineReaders.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil)
		lineReaders.Put(br)
	}()
	for {
		chunk, isPrefix, err := br.ReadLine()
		if err != nil {
			return
		}
		line := string(chunk)
		if !isPrefix {
			line = strings.TrimSuffix(line, "\r")
		}
		log(stream, line)
		if flush != nil && br.Buffered() == 0 {
			flush()
		}
	}
}

// afterExitMax bounds what the readers take from the pipes once the step's
// processes are gone: far more than a pipe holds (1MB at most unprivileged)
// and the line buffer, so it never cuts what the step wrote, while a
// descendant that left the step's group cannot keep the step going by
// printing forever.
const afterExitMax = 4 << 20

// OutputReaders read a step's output streams into its log. Their log call
// may wait for room in a full journal; they tell when one does, so that
// the wait for the streams to end after the step is not cut short by time
// the readers spend waiting for delivery.
type OutputReaders struct {
	wg    sync.WaitGroup
	inLog atomic.Int32
	read  atomic.Int64 // bytes read
}

// Start reads r's lines into log as stream until EOF or a read error, then
// closes r; flush (optional, see Step.Flush) is called whenever the reader
// has passed on all it read.
func (o *OutputReaders) Start(r io.ReadCloser, stream string, log func(stream, line string), flush func()) {
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		defer r.Close()
		readLines(countingReader{r, &o.read}, stream, func(stream, line string) {
			o.inLog.Add(1)
			defer o.inLog.Add(-1)
			log(stream, line)
		}, flush)
	}()
}

// Await waits, once the step is over, for done; after grace of time with
// no reader waiting for room, or afterExitMax bytes read, it calls stop
// (which must end the streams) and returns.
func (o *OutputReaders) Await(done <-chan struct{}, grace time.Duration, stop func()) {
	const steps = 20
	tick := time.NewTicker(grace / steps)
	defer tick.Stop()
	from := o.read.Load()
	var idle time.Duration
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		if o.inLog.Load() == 0 {
			idle += grace / steps
		}
		if idle >= grace || o.read.Load()-from > afterExitMax {
			stop()
			return
		}
	}
}

// Wait waits for the readers to end.
func (o *OutputReaders) Wait() { o.wg.Wait() }

// Drained is closed once the readers end.
func (o *OutputReaders) Drained() <-chan struct{} {
	ch := make(chan struct{})
	go func() { o.wg.Wait(); close(ch) }()
	return ch
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
