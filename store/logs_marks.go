package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// A job's JSONL file holds only the lines, as readers get them, so the
// step runs' marks (RunMark) live beside it in `<job id>.marks`, one JSON
// record a line: before each chunk that advances a mark is appended to the
// log, the new mark is appended there, naming the bytes the chunk's lines
// will take in the log file and the mark before it. After a restart the
// last record of each step holds only if those bytes are in the log file
// (else the mark before it does), so a server killed between the two
// writes neither skips lines the log lacks nor writes twice those it has.
// Once the file grows past marksCompactAt it is rewritten (aside, then
// renamed over) with each step's last mark alone, an ended run's included
// (see jobCounts.marks).

// marksCompactAt is the size past which a marks file is rewritten, plus
// marksRoom bytes for each mark it keeps.
const (
	marksCompactAt = 64 << 10
	marksRoom      = 256
)

// markRecord is one line of a marks file.
type markRecord struct {
	Step string `json:"step"`
	Run  string `json:"run"`
	Seq  int64  `json:"seq"`
	// Lines is set on the record written before a chunk's lines: where
	// they go in the log file, and the mark that holds if they are not
	// there. A record without it holds as it is.
	Lines *markedLines `json:"lines,omitempty"`
}

// markedLines says where a chunk's lines go in the log file, and the mark
// that holds if they are not there.
type markedLines struct {
	Start   int64  `json:"start"`
	End     int64  `json:"end"`
	CRC     uint32 `json:"crc"` // CRC-32C of the bytes from Start to End
	PrevRun string `json:"prev_run,omitempty"`
	PrevSeq int64  `json:"prev_seq,omitempty"`
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func (l *Logs) marksPath(jobID string) string { return filepath.Join(l.dir, jobID+".marks") }

// writeMark appends the chunk's new mark to the job's marks file, its
// lines going to the log file at start; a file grown too big is rewritten
// with each step's last mark instead.
func writeMark(path string, c LogChunk, start int64) error {
	next := c.Marks[c.Marked]
	rec := markRecord{Step: c.Marked, Run: next.Run, Seq: next.Seq, Lines: &markedLines{
		Start: start, End: start + int64(len(c.Data)), CRC: crc32.Checksum(c.Data, crcTable),
		PrevRun: c.Prev.Run, PrevSeq: c.Prev.Seq}}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("write log marks: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("write log marks: %w", err)
	}
	if info.Size() > marksCompactAt+marksRoom*int64(len(c.Marks)) {
		return rewriteMarks(path, c, rec)
	}
	raw, err := encodeMarks(rec)
	if err == nil {
		_, err = f.Write(raw)
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return fmt.Errorf("write log marks: %w", err)
	}
	return nil
}

// rewriteMarks replaces the marks file with each step's last mark, rec
// last.
func rewriteMarks(path string, c LogChunk, rec markRecord) error {
	recs := make([]markRecord, 0, len(c.Marks))
	for _, step := range slices.Sorted(maps.Keys(c.Marks)) {
		if step != c.Marked {
			m := c.Marks[step]
			recs = append(recs, markRecord{Step: step, Run: m.Run, Seq: m.Seq})
		}
	}
	raw, err := encodeMarks(append(recs, rec)...)
	if err != nil {
		return fmt.Errorf("write log marks: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return fmt.Errorf("write log marks: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write log marks: %w", err)
	}
	return nil
}

func encodeMarks(recs ...markRecord) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// readMarks reads the job's marks file: each step's last mark, one naming
// lines only if they are in the log file (else the mark before it). A line
// cut short by a failed write is skipped: its chunk's lines were not
// written either.
func readMarks(path, logPath string) (map[string]RunMark, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read log marks: %w", err)
	}
	last := map[string]markRecord{}
	for line := range bytes.Lines(raw) {
		var r markRecord
		if json.Unmarshal(line, &r) == nil {
			last[r.Step] = r
		}
	}
	out := make(map[string]RunMark, len(last))
	for step, r := range last {
		mark := RunMark{Run: r.Run, Seq: r.Seq}
		if r.Lines != nil {
			in, err := linesIn(logPath, r.Lines)
			if err != nil {
				return nil, err
			}
			if !in {
				mark = RunMark{Run: r.Lines.PrevRun, Seq: r.Lines.PrevSeq}
			}
		}
		if mark.Run != "" {
			out[step] = mark
		}
	}
	return out, nil
}

// linesIn says whether the log file holds the bytes a pending mark names.
func linesIn(logPath string, p *markedLines) (bool, error) {
	if p.End < p.Start {
		return false, nil
	}
	f, err := os.Open(logPath)
	if errors.Is(err, fs.ErrNotExist) {
		return p.End == p.Start, nil
	}
	if err != nil {
		return false, fmt.Errorf("check log marks: %w", err)
	}
	defer f.Close()
	h := crc32.New(crcTable)
	n, err := io.Copy(h, io.NewSectionReader(f, p.Start, p.End-p.Start))
	if err != nil {
		return false, fmt.Errorf("check log marks: %w", err)
	}
	return n == p.End-p.Start && h.Sum32() == p.CRC, nil
}
