package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// ElectorConfig says who a replica is and how long it may lead unrenewed.
type ElectorConfig struct {
	// Holder names this process in the lease row; unique per process
	// (a restarted replica is a new holder, and waits like any other).
	Holder string
	// AdvertiseURL is where the followers forward to while this one leads.
	AdvertiseURL string
	// Lease is how long a renewal holds the lease (ha.lease); Renew how
	// often the leader renews it and a follower looks for an expired one
	// (ha.renew).
	Lease, Renew time.Duration
	Log          *slog.Logger
}

// Validate checks the lease leaves room for renewals.
func (c ElectorConfig) Validate() error {
	switch {
	case c.Holder == "":
		return errors.New("ha: a holder name is required")
	case c.Renew <= 0 || c.Lease <= 0:
		return fmt.Errorf("ha: lease (%s) and renew (%s) must be positive", c.Lease, c.Renew)
	case c.Renew*2 > c.Lease:
		return fmt.Errorf("ha.renew (%s) must be at most half of ha.lease (%s): a leader renews at least twice a lease", c.Renew, c.Lease)
	}
	return nil
}

// Margin is how long before its lease can have run out a leader stops
// leading by its own clock: time to stop the orchestrator and its
// workers, and room for the two clocks' rates to differ.
func (c ElectorConfig) Margin() time.Duration { return c.Lease / 5 }

// Leadership is what a replica knows of who leads.
type Leadership struct {
	Leader bool  // this replica leads
	Epoch  int64 // the lease's epoch as last seen (this replica's when Leader)
	// LeaderURL is the leader's advertise_url; "" while no replica holds
	// an unexpired lease (a failover).
	LeaderURL string
}

// Elector takes and renews the lease on a connection of its own, outside
// the pool: a pool exhausted by a burst of writes must not delay the
// renewal that keeps those writes legal. While it leads it arms the DB's
// fence, so every write carries the epoch.
type Elector struct {
	db      *DB
	cfg     ElectorConfig
	log     *slog.Logger
	conn    *pgx.Conn
	changed chan struct{}

	mu  sync.Mutex
	cur Leadership
	led int64 // the epoch this replica last led at
}

// NewElector makes an elector over db and turns the fence on: from now on
// db refuses every write until the elector leads.
func (db *DB) NewElector(cfg ElectorConfig) (*Elector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db.fence.Store(&fenceState{})
	return &Elector{db: db, cfg: cfg, log: log, changed: make(chan struct{}, 1)}, nil
}

// Current is the replica's leadership as of now.
func (e *Elector) Current() Leadership {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cur
}

// Changed is signalled when Current changes (coalesced: read Current).
func (e *Elector) Changed() <-chan struct{} { return e.changed }

func (e *Elector) set(l Leadership) {
	e.mu.Lock()
	was := e.cur
	e.cur = l
	e.mu.Unlock()
	if was == l {
		return
	}
	if was.Leader != l.Leader {
		if l.Leader {
			e.log.Info("leadership: this replica leads", "epoch", l.Epoch, "holder", e.cfg.Holder)
		} else {
			e.log.Warn("leadership: this replica no longer leads", "epoch", was.Epoch, "leader", l.LeaderURL)
		}
	} else if was.LeaderURL != l.LeaderURL || was.Epoch != l.Epoch {
		e.log.Info("leadership: leader changed", "epoch", l.Epoch, "leader", l.LeaderURL)
	}
	select {
	case e.changed <- struct{}{}:
	default:
	}
}

// Run takes the lease when it is free and renews it while it holds it,
// until ctx ends; it then stops leading (without giving the lease up: see
// Release). Leading ends, with the fence closed first, when a renewal
// finds the lease gone, or when the lease minus the margin has passed
// since the last successful renewal was sent, whether or not the
// database answered meanwhile.
func (e *Elector) Run(ctx context.Context) {
	defer func() {
		e.stepDown("the elector stopped", "")
		if e.conn != nil {
			_ = e.conn.Close(context.Background())
			e.conn = nil
		}
	}()
	var until time.Time // the monotonic deadline while leading
	for {
		l := e.Current()
		if l.Leader {
			until = e.renew(ctx, l, until)
		} else {
			until = e.take(ctx)
		}
		wait := e.cfg.Renew
		if e.Current().Leader {
			wait = min(wait, time.Until(until))
		}
		t := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// take takes an expired lease, or reads who holds it.
func (e *Elector) take(ctx context.Context) time.Time {
	conn, err := e.connect(ctx)
	if err != nil {
		e.log.Warn("leadership: cannot reach the database", "err", err)
		e.set(Leadership{Epoch: e.Current().Epoch})
		return time.Time{}
	}
	qctx, cancel := context.WithTimeout(ctx, e.cfg.Lease)
	defer cancel()
	sent := time.Now()
	var epoch int64
	err = conn.QueryRow(qctx, `UPDATE leader_lease SET holder = $1, advertise_url = $2, epoch = epoch + 1,
			expires_at = now() + $3 * interval '1 microsecond'
		WHERE id AND expires_at <= now() RETURNING epoch`,
		e.cfg.Holder, e.cfg.AdvertiseURL, e.cfg.Lease.Microseconds()).Scan(&epoch)
	if err == nil {
		until := sent.Add(e.cfg.Lease - e.cfg.Margin())
		e.db.fence.Store(&fenceState{epoch: epoch, until: until})
		e.mu.Lock()
		e.led = epoch
		e.mu.Unlock()
		e.set(Leadership{Leader: true, Epoch: epoch, LeaderURL: e.cfg.AdvertiseURL})
		return until
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		e.dropConn(err)
		e.log.Warn("leadership: cannot take the lease", "err", err)
		return time.Time{}
	}
	var (
		url  string
		live bool
	)
	err = conn.QueryRow(qctx, `SELECT advertise_url, epoch, expires_at > now() FROM leader_lease WHERE id`).Scan(&url, &epoch, &live)
	if err != nil {
		e.dropConn(err)
		e.log.Warn("leadership: cannot read the lease", "err", err)
		return time.Time{}
	}
	if !live {
		url = ""
	}
	e.set(Leadership{Epoch: epoch, LeaderURL: url})
	return time.Time{}
}

// renew extends the lease held at l.Epoch; it returns the new deadline,
// or steps down.
func (e *Elector) renew(ctx context.Context, l Leadership, until time.Time) time.Time {
	if !time.Now().Before(until) {
		e.stepDown("no renewal succeeded within the lease minus its margin", "")
		return time.Time{}
	}
	conn, err := e.connect(ctx)
	if err != nil {
		e.log.Warn("leadership: cannot reach the database to renew", "err", err, "leads_for", time.Until(until).Round(time.Millisecond))
		return until
	}
	// A renewal answered after the deadline is no use: the fence closed.
	qctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	sent := time.Now()
	var n int64
	err = conn.QueryRow(qctx, `UPDATE leader_lease SET expires_at = now() + $3 * interval '1 microsecond'
		WHERE id AND holder = $1 AND epoch = $2 AND expires_at > now() RETURNING epoch`,
		e.cfg.Holder, l.Epoch, e.cfg.Lease.Microseconds()).Scan(&n)
	switch {
	case err == nil:
		until = sent.Add(e.cfg.Lease - e.cfg.Margin())
		e.db.fence.Store(&fenceState{epoch: l.Epoch, until: until})
		return until
	case errors.Is(err, pgx.ErrNoRows):
		e.stepDown("the lease was taken or ran out", "")
		return time.Time{}
	default:
		e.dropConn(err)
		if !time.Now().Before(until) {
			e.stepDown("no renewal succeeded within the lease minus its margin", "")
			return time.Time{}
		}
		e.log.Warn("leadership: renewal failed", "err", err, "leads_for", time.Until(until).Round(time.Millisecond))
		return until
	}
}

// stepDown closes the fence, then says this replica follows.
func (e *Elector) stepDown(why, leader string) {
	e.db.fence.Store(&fenceState{})
	if l := e.Current(); l.Leader {
		e.log.Warn("leadership: stepping down", "epoch", l.Epoch, "why", why)
		e.set(Leadership{Epoch: l.Epoch, LeaderURL: leader})
	}
}

// Release gives the lease up at once (a graceful shutdown), so a follower
// takes over within a renew interval rather than a lease. Call it after
// Run has returned and the leader's work has stopped.
func (e *Elector) Release(ctx context.Context) error {
	e.mu.Lock()
	epoch := e.led
	e.mu.Unlock()
	if epoch == 0 {
		return nil
	}
	conn, err := connect(ctx, e.db.dsn)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	_, err = conn.Exec(ctx, `UPDATE leader_lease SET expires_at = now() WHERE id AND holder = $1 AND epoch = $2 AND expires_at > now()`,
		e.cfg.Holder, epoch)
	if err != nil {
		return fmt.Errorf("release the lease: %w", err)
	}
	return nil
}

func (e *Elector) connect(ctx context.Context) (*pgx.Conn, error) {
	if e.conn != nil && !e.conn.IsClosed() {
		return e.conn, nil
	}
	cctx, cancel := context.WithTimeout(ctx, e.cfg.Renew)
	defer cancel()
	conn, err := connect(cctx, e.db.dsn)
	if err != nil {
		return nil, err
	}
	e.conn = conn
	return conn, nil
}

// dropConn forgets a connection a failed statement may have left unusable.
func (e *Elector) dropConn(err error) {
	if e.conn != nil && connectionLost(err) {
		_ = e.conn.Close(context.Background())
		e.conn = nil
	}
}
