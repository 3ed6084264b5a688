package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

// Retention says how long ended jobs and their local logs are kept; zero
// keeps them forever.
type Retention struct {
	Jobs time.Duration
	Logs time.Duration
}

// SweeperConfig configures a Sweeper; zero values take the defaults.
type SweeperConfig struct {
	DB   SweepDB
	Logs LogBackend // nil: no logs to delete
	// Archive, if set, archives the logs: log retention deletes a local
	// log only once the archive holds it.
	Archive *ArchivingLogs
	// ArchivePending, if set, is told after each log sweep how many old
	// local logs it kept because the archive does not hold them yet.
	ArchivePending func(n int)
	Retention      Retention
	Interval       time.Duration    // between sweeps (default 10 minutes)
	Batch          int              // records per write transaction (default SweepBatch)
	Now            func() time.Time // default time.Now
	Logger         *slog.Logger     // default slog.Default()
	// Pause is the least wait between two transactions (default 5ms); the
	// wait is also at least writerShare times the last transaction, so the
	// sweep holds the single writer a bounded share of the time even on a
	// slow disk.
	Pause time.Duration
}

// Sweeper deletes ended jobs and logs older than the retention, once at
// start and then every Interval, over either store and either log backend.
type Sweeper struct {
	cfg SweeperConfig
	// told holds the jobs whose log already says it is kept for the
	// archive, so each says it once (per process).
	told map[string]bool
}

// SweepCounts is what one sweep deleted.
type SweepCounts struct {
	Jobs, Steps, Logs int
	// KeptForArchive is how many old local logs were kept because the
	// archive does not hold them yet.
	KeptForArchive int
}

// NewSweeper returns a sweeper; Run starts it.
func NewSweeper(cfg SweeperConfig) *Sweeper {
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Minute
	}
	if cfg.Batch <= 0 {
		cfg.Batch = SweepBatch
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Pause <= 0 {
		cfg.Pause = 5 * time.Millisecond
	}
	return &Sweeper{cfg: cfg, told: map[string]bool{}}
}

// Run sweeps until ctx ends. A failed sweep is logged and tried again at
// the next interval: retention is housekeeping, not a reason to stop
// serving.
func (s *Sweeper) Run(ctx context.Context) error {
	if s.cfg.Retention == (Retention{}) {
		<-ctx.Done()
		return ctx.Err()
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Error("retention sweep failed; trying again later", "err", err, "in", s.cfg.Interval)
		}
		t.Reset(s.cfg.Interval)
	}
}

// Sweep deletes what is older than the retention now, in transactions of
// at most Batch records with a pause between them, and logs what it did.
func (s *Sweeper) Sweep(ctx context.Context) (SweepCounts, error) {
	var n SweepCounts
	now := s.cfg.Now()
	start := time.Now()
	longest, err := s.sweepJobs(ctx, now, &n)
	if err == nil {
		err = s.sweepLogs(ctx, now, &n)
	}
	if n != (SweepCounts{}) {
		s.cfg.Logger.Info("retention sweep", "jobs_deleted", n.Jobs, "steps_deleted", n.Steps,
			"logs_deleted", n.Logs, "logs_kept_for_archive", n.KeptForArchive, "took", time.Since(start).Round(time.Millisecond),
			"longest_transaction", longest.Round(time.Microsecond))
	}
	return n, err
}

// sweepJobs deletes the old ended jobs and says how long its longest
// transaction held the store's writer.
func (s *Sweeper) sweepJobs(ctx context.Context, now time.Time, n *SweepCounts) (longest time.Duration, err error) {
	if s.cfg.Retention.Jobs <= 0 {
		return 0, nil
	}
	cutoff := now.Add(-s.cfg.Retention.Jobs)
	var from []byte
	for {
		began := time.Now()
		res, err := s.cfg.DB.DeleteEndedJobs(ctx, cutoff, from, s.cfg.Batch)
		took := time.Since(began)
		longest = max(longest, took)
		if err != nil {
			return longest, err
		}
		n.Jobs += len(res.Jobs)
		n.Steps += res.Steps
		for _, id := range res.Jobs {
			if err := s.removeLog(id, n); err != nil {
				return longest, err
			}
		}
		if from = res.Next; from == nil {
			return longest, nil
		}
		if err := s.pause(ctx, max(s.cfg.Pause, took*writerShare)); err != nil {
			return longest, err
		}
	}
}

func (s *Sweeper) sweepLogs(ctx context.Context, now time.Time, n *SweepCounts) error {
	if s.cfg.Logs == nil || s.cfg.Retention.Logs <= 0 {
		return nil
	}
	cutoff := now.Add(-s.cfg.Retention.Logs)
	ids, err := s.cfg.Logs.LastWrittenBefore(cutoff)
	if err != nil {
		return err
	}
	for len(ids) > 0 {
		part := ids[:min(len(ids), s.cfg.Batch)]
		ids = ids[len(part):]
		old, err := s.cfg.DB.EndedBefore(ctx, part, cutoff)
		if err != nil {
			return err
		}
		for _, id := range old {
			if keep, err := s.keepForArchive(ctx, id); err != nil || keep {
				n.KeptForArchive++
				if err != nil {
					s.cfg.Logger.Warn("log kept: cannot tell whether the archive holds it", "job", id, "err", err)
				}
				continue
			}
			if err := s.removeLog(id, n); err != nil {
				return err
			}
		}
	}
	if s.cfg.ArchivePending != nil && s.cfg.Archive != nil {
		s.cfg.ArchivePending(n.KeptForArchive)
	}
	return nil
}

// keepForArchive says whether the job's local log must stay because the
// archive does not hold it yet. The first time, it says so in the job's
// log (keeping the file's time, so the log is swept as soon as it is
// archived), and a failed upload is queued again.
func (s *Sweeper) keepForArchive(ctx context.Context, id string) (bool, error) {
	if s.cfg.Archive == nil {
		return false, nil
	}
	state, err := s.cfg.Archive.State(ctx, id)
	if err != nil || state == Archived {
		if state == Archived {
			delete(s.told, id)
		}
		return err != nil, err
	}
	if !s.told[id] {
		why := "its upload is still under way"
		if state == UploadFailed {
			why = "its upload failed; trying again"
		}
		msg := fmt.Sprintf("log retention keeps this local log until the archive holds it: %s", why)
		if err := s.cfg.Logs.AppendNote(id, engine.LogLine{TS: s.cfg.Now().UTC(), Stream: "stderr", Step: engine.ServerStep, Line: msg}); err != nil {
			return true, err
		}
		s.told[id] = true
	}
	if state == UploadFailed {
		s.cfg.Archive.Reupload(id)
	}
	return true, nil
}

func (s *Sweeper) removeLog(id string, n *SweepCounts) error {
	if s.cfg.Logs == nil {
		return nil
	}
	removed, err := s.cfg.Logs.Remove(id)
	if removed {
		n.Logs++
	}
	return err
}

// writerShare: a sweep waits this many times as long as its last
// transaction took before the next, holding bbolt's writer at most a
// fifth of the time; the orchestrator's commits take the rest.
const writerShare = 4

func (s *Sweeper) pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
