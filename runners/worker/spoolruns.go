package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// The runs log: one file the spool appends a record to when a step run
// begins, when a run without log lines finishes (its result) and when a
// run is delivered (its end). A run gets a directory of its own only with
// its first log line, so a step that prints nothing costs the spool one
// append at its start, one at its end and one when delivered, rather than
// a directory and two files created and removed (metadata writes a disk
// pays for dearly). Its records are not synced as written, like a run's
// lines; Persist syncs the runs log, for every run at once (group commit).
const runsFile = "runs.log"

// runsRecord is one line of the runs log.
type runsRecord struct {
	Begin  *runMeta `json:"begin,omitempty"`
	Run    string   `json:"run,omitempty"` // of a result
	Result *Result  `json:"result,omitempty"`
	End    string   `json:"end,omitempty"`
}

// liveRun is what the runs log must keep of a run not yet delivered.
type liveRun struct {
	meta runMeta
	res  *Result
}

// runsCompactAt is the size past which the runs log is rewritten with the
// runs still undelivered (it is emptied whenever none is left).
const runsCompactAt = 4 << 20

// openRunsLog opens the runs log for appending.
func (s *Spool) openRunsLog() error {
	f, err := os.OpenFile(filepath.Join(s.dir, runsFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("spool_dir: open %s: %w", runsFile, err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("spool_dir: open %s: %w", runsFile, err)
	}
	s.runs, s.runsSize = f, info.Size()
	return nil
}

// appendRuns appends a record to the runs log, keeping track of the runs
// alive in it; once none is, the log is emptied.
func (s *Spool) appendRuns(rec runsRecord) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	raw = append(raw, '\n')
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	switch {
	case rec.Begin != nil:
		s.live[rec.Begin.Run] = &liveRun{meta: *rec.Begin}
	case rec.Result != nil:
		if l := s.live[rec.Run]; l != nil {
			l.res = rec.Result
		}
	case rec.End != "":
		delete(s.live, rec.End)
		if len(s.live) == 0 {
			if err := s.runs.Truncate(0); err == nil {
				s.runsSize = 0
				return nil
			}
		}
	}
	if _, err := s.runs.Write(raw); err != nil {
		return err
	}
	s.runsSize += int64(len(raw))
	if s.runsSize > runsCompactAt {
		if err := s.compactRunsLocked(); err != nil {
			s.log.Warn("spool: cannot compact the runs log", "err", err)
		}
	}
	return nil
}

// compactRunsLocked rewrites the runs log with the live runs' records.
func (s *Spool) compactRunsLocked() error {
	path := filepath.Join(s.dir, runsFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	var size int64
	for _, l := range s.live {
		meta := l.meta
		recs := []runsRecord{{Begin: &meta}}
		if l.res != nil {
			recs = append(recs, runsRecord{Run: meta.Run, Result: l.res})
		}
		for _, rec := range recs {
			raw, _ := json.Marshal(rec)
			n, err := f.Write(append(raw, '\n'))
			size += int64(n)
			if err != nil {
				f.Close()
				return err
			}
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		f.Close()
		return err
	}
	s.runs.Close()
	s.runs, s.runsSize = f, size
	return nil
}

// syncRuns makes the runs log's records survive a crash of the machine.
func (s *Spool) syncRuns() error {
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	return s.runs.Sync()
}

// readRunsLog reads the runs a previous process left in the runs log, by
// run id: those not delivered, with their result if they had one.
func (s *Spool) readRunsLog() (map[string]*spoolRun, error) {
	f, err := os.Open(filepath.Join(s.dir, runsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	runs := map[string]*spoolRun{}
	_, err = readRuns(f, func(rec runsRecord) {
		switch {
		case rec.Begin != nil && rec.Begin.Run != "" && rec.Begin.JobID != "" && rec.Begin.Step != "":
			runs[rec.Begin.Run] = &spoolRun{sp: s, dir: filepath.Join(s.dir, rec.Begin.Run), meta: *rec.Begin}
		case rec.Result != nil:
			if r := runs[rec.Run]; r != nil {
				res := *rec.Result
				r.res = &res
			}
		case rec.End != "":
			delete(runs, rec.End)
		}
	})
	return runs, err
}

// readRuns calls f with each whole record of the runs log that decodes.
func readRuns(rd io.Reader, f func(runsRecord)) (bool, error) {
	return readRecordLines(rd, func(raw []byte) bool {
		var rec runsRecord
		if json.Unmarshal(raw, &rec) == nil {
			f(rec)
		}
		return true
	})
}
