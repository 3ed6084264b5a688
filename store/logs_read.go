package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"

	"github.com/appliance-sh/appliance/engine"
)

// readBlock is how much of a log is read at a time.
const readBlock = 64 << 10

// ReadLog writes the lines q selects from the job's log to w as it reads
// them, so memory stays constant whatever the log's size, and says which
// lines it wrote. A job without a log writes nothing. Without a JSONL file
// it reads a legacy `<job id>.log` file the same way.
//
// Lines are read up to the end the file had when the read began: lines
// appended meanwhile are left for the next read (q.After = the page's
// Next), and a line being written is never shown half.
func (l *Logs) ReadLog(ctx context.Context, jobID string, q engine.LogQuery, w io.Writer) (engine.LogPage, error) {
	if err := ValidJobID(jobID); err != nil {
		return engine.LogPage{}, fmt.Errorf("read log: %w", err)
	}
	f, end, err := l.openLocal(jobID)
	if err != nil {
		return engine.LogPage{}, fmt.Errorf("read log of job %s: %w", jobID, err)
	}
	if f == nil {
		return engine.LogPage{Next: q.After}, nil
	}
	defer f.Close()
	page, err := readLocal(ctx, f, end, q, w)
	if err != nil {
		return page, fmt.Errorf("read log of job %s: %w", jobID, err)
	}
	return page, nil
}

// openLocal opens the job's JSONL file, or else its legacy file, and says
// where reading stops: after the last complete line of a JSONL file (an
// append may be under way), at the end of a legacy one. No file is nil.
func (l *Logs) openLocal(jobID string) (*os.File, int64, error) {
	f, err := os.Open(l.jsonlPath(jobID))
	jsonl := err == nil
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.Open(l.legacyPath(jobID))
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	end := info.Size()
	if jsonl {
		if end, err = lastLineEnd(f, end); err != nil {
			f.Close()
			return nil, 0, err
		}
	}
	return f, end, nil
}

// lastLineEnd returns the offset just after the last newline before size.
func lastLineEnd(f io.ReaderAt, size int64) (int64, error) {
	buf := make([]byte, min(readBlock, size))
	for pos := size; pos > 0; {
		n := min(int64(len(buf)), pos)
		pos -= n
		if _, err := f.ReadAt(buf[:n], pos); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return pos + int64(i) + 1, nil
		}
	}
	return 0, nil
}

// readLocal answers q from the first end bytes of a local log file. The
// tail of the whole log is found by reading backwards from the end; the
// rest reads forwards.
func readLocal(ctx context.Context, f *os.File, end int64, q engine.LogQuery, w io.Writer) (engine.LogPage, error) {
	if q.Tail > 0 && q.Step == "" {
		return tailFile(ctx, f, end, q.Tail, w)
	}
	open := func() (io.Reader, error) { return io.NewSectionReader(f, 0, end), nil }
	return readForward(ctx, open, q, w)
}

// tailFile writes the last n lines of the first end bytes of f. Next is
// the number of lines up to the end, counted without decoding anything.
func tailFile(ctx context.Context, f io.ReaderAt, end int64, n int, w io.Writer) (engine.LogPage, error) {
	start, lines, err := tailStart(f, end, n)
	if err != nil {
		return engine.LogPage{}, err
	}
	before, err := countNewlines(ctx, io.NewSectionReader(f, 0, start))
	if err != nil {
		return engine.LogPage{}, err
	}
	if _, err := io.Copy(w, io.NewSectionReader(f, start, end-start)); err != nil {
		return engine.LogPage{}, err
	}
	return engine.LogPage{Lines: lines, Next: before + lines}, nil
}

// tailStart finds where the last n lines of the first end bytes of f
// begin, reading backwards a block at a time, and how many lines there are
// from there (fewer than n when the log is shorter).
func tailStart(f io.ReaderAt, end int64, n int) (start int64, lines int, err error) {
	if end == 0 {
		return 0, 0, nil
	}
	// The byte before end ends the last line (or is inside it, in a legacy
	// file without a final newline): every newline before it starts a line.
	buf := make([]byte, min(readBlock, end))
	pos := end - 1
	lines = 1
	for pos > 0 {
		size := min(int64(len(buf)), pos)
		block := buf[:size]
		if _, err := f.ReadAt(block, pos-size); err != nil {
			return 0, 0, err
		}
		for i := len(block) - 1; i >= 0; i-- {
			if block[i] != '\n' {
				continue
			}
			if lines == n {
				return pos - size + int64(i) + 1, lines, nil
			}
			lines++
		}
		pos -= size
	}
	return 0, lines, nil
}

// countNewlines counts the lines of r, every one ending in a newline.
func countNewlines(ctx context.Context, r io.Reader) (int, error) {
	buf := make([]byte, readBlock)
	count := 0
	for {
		n, err := r.Read(buf)
		count += bytes.Count(buf[:n], []byte{'\n'})
		if err == io.EOF {
			return count, nil
		}
		if err != nil {
			return count, err
		}
		if err := ctx.Err(); err != nil {
			return count, err
		}
	}
}

// readForward answers q reading from the start of the log; open gives a
// fresh reader at the start. A tail of one step's lines takes two passes:
// one counts them, the next skips all but the last q.Tail.
func readForward(ctx context.Context, open func() (io.Reader, error), q engine.LogQuery, w io.Writer) (engine.LogPage, error) {
	skip := q.After
	if q.Tail > 0 {
		r, err := open()
		if err != nil {
			return engine.LogPage{}, err
		}
		total, err := scanLines(ctx, r, q.Step, math.MaxInt, nil)
		if err != nil {
			return engine.LogPage{}, err
		}
		skip = max(0, total-q.Tail)
	}
	r, err := open()
	if err != nil {
		return engine.LogPage{}, err
	}
	total, err := scanLines(ctx, r, q.Step, skip, w)
	if err != nil {
		return engine.LogPage{}, err
	}
	lines := max(0, total-skip)
	return engine.LogPage{Lines: lines, Next: skip + lines}, nil
}

// scanLines counts the lines of r that belong to step (all when step is
// empty) and writes those after the first skip of them to w (nil: none).
func scanLines(ctx context.Context, r io.Reader, step string, skip int, w io.Writer) (selected int, err error) {
	br := bufio.NewReaderSize(r, readBlock)
	lineStart, keep := true, false
	for seen := 0; ; {
		frag, err := br.ReadSlice('\n')
		if lineStart && len(frag) > 0 {
			seen++
			keep = step == ""
			if !keep {
				keep = stepIs(frag, err == nil || err == io.EOF, step)
			}
			if keep {
				selected++
				keep = selected > skip && w != nil
			}
			if seen%4096 == 0 {
				if cerr := ctx.Err(); cerr != nil {
					return selected, cerr
				}
			}
		}
		if keep {
			if _, werr := w.Write(frag); werr != nil {
				return selected, werr
			}
		}
		lineStart = err != bufio.ErrBufferFull
		switch {
		case err == io.EOF:
			return selected, nil
		case err != nil && err != bufio.ErrBufferFull:
			return selected, err
		}
	}
}

// stepOf returns the step of a log line. Lines the server wrote have their
// fields in a fixed order, so the step is read off the start of the line
// without decoding it; other lines are decoded when whole. A line that
// does not decode belongs to no step.
func stepOf(line []byte, whole bool) (string, bool) {
	if s, ok := stepFast(line); ok {
		return string(s), true
	}
	return stepDecoded(line, whole)
}

// stepIs reports whether a log line belongs to step, as stepOf tells it,
// without copying the step name of a line the server wrote (a filtered
// read asks this of every line).
func stepIs(line []byte, whole bool, step string) bool {
	if s, ok := stepFast(line); ok {
		return string(s) == step
	}
	s, ok := stepDecoded(line, whole)
	return ok && s == step
}

// stepDecoded decodes the step of a whole line; a line that does not
// decode belongs to no step.
func stepDecoded(line []byte, whole bool) (string, bool) {
	if !whole {
		return "", false
	}
	var l struct {
		Step string `json:"step"`
	}
	if json.Unmarshal(line, &l) != nil {
		return "", false
	}
	return l.Step, true
}

// stepFast reads the step of a line in wireLine's layout,
// {"ts":"…","stream":"…","step":"…",…, when the name needs no unescaping.
func stepFast(line []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(line, []byte(`{"ts":"`))
	if !ok {
		return nil, false
	}
	i := bytes.IndexByte(rest, '"')
	if i < 0 {
		return nil, false
	}
	if rest, ok = bytes.CutPrefix(rest[i+1:], []byte(`,"stream":"`)); !ok {
		return nil, false
	}
	if i = bytes.IndexByte(rest, '"'); i < 0 {
		return nil, false
	}
	if rest, ok = bytes.CutPrefix(rest[i+1:], []byte(`,"step":"`)); !ok {
		return nil, false
	}
	i = bytes.IndexByte(rest, '"')
	if i < 0 || bytes.IndexByte(rest[:i], '\\') >= 0 {
		return nil, false
	}
	return rest[:i], true
}
