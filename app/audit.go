package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/app/metrics"
	"github.com/appliance-sh/appliance/audit"
)

// auditStore is a store that keeps the trail and signs it with a key.
type auditStore interface {
	audit.Store
	SetAuditKey(audit.Key)
}

// auditTrail is the server's side of the audit trail: the queue of
// entries that record no change (denied requests, failed sign-ins,
// config reloads), which the engine's commits take, and the head the
// server logs every head_every entries and at shutdown (so a truncation
// of the newest entries shows against the log), with /metrics.
type auditTrail struct {
	store   auditStore
	queue   *audit.Queue
	metrics *metrics.Audit
	log     *slog.Logger
	every   int64
	keep    time.Duration
	logged  int64 // the last head logged; the watch goroutine's alone
	// leading says whether this server writes the state now: only the
	// leader of a pair trims (a follower's writes are fenced off).
	leading func() bool
}

// auditPollInterval is how often the head is checked for head_every.
const auditPollInterval = 5 * time.Second

// openAudit keys the store's chain: audit.key, or a key generated into
// data_dir on the first start, with a warning saying what that protects
// against and what not.
func openAudit(cfg *config.Server, state any, reg *metrics.Registry, log *slog.Logger) (*auditTrail, error) {
	st, ok := state.(auditStore)
	if !ok {
		return nil, fmt.Errorf("audit: the %s store keeps no audit trail", cfg.Storage.Type)
	}
	key, generated, err := cfg.AuditKey(true)
	if err != nil {
		return nil, err
	}
	if generated {
		log.Warn("audit: no audit.key configured; generated one into "+cfg.AuditKeyFile()+
			": the trail's chain then holds against whoever can write the database but not read that file; set audit.key (or "+
			config.AuditKeyEnv+") from a secret store to keep the key apart", "file", cfg.AuditKeyFile())
	}
	if !cfg.Test.AuditOff {
		st.SetAuditKey(key)
	}
	t := &auditTrail{store: st, queue: audit.NewQueue(0), log: log.With("component", "audit"),
		every: int64(cfg.Audit.HeadEvery), keep: cfg.AuditRetention()}
	t.metrics = reg.WatchAudit(t.queue.Dropped)
	return t, nil
}

// denied counts a refused request for /metrics (the API queues its entry).
func (t *auditTrail) denied(route string) { t.metrics.Denied(route) }

// record queues an entry of the server's own (a config reload).
func (t *auditTrail) record(action, outcome, reason string) {
	t.queue.Push(audit.Entry{At: time.Now(), Source: audit.SourceSystem, Action: action, Outcome: outcome, Reason: reason})
}

// logHead logs the chain's head and shows it in /metrics.
func (t *auditTrail) logHead(ctx context.Context, why string) {
	_, head, err := t.store.AuditHeads(ctx)
	if err != nil {
		t.log.Error("audit: read the chain's head", "err", err)
		return
	}
	t.logged = head.Seq
	t.metrics.Head(head.Seq, head.MAC)
	t.log.Info("audit chain head", "seq", head.Seq, "mac", head.MAC, "why", why)
}

// run logs the head at start, every head_every entries and when ctx
// ends, and drops entries past audit.retention from the front.
func (t *auditTrail) run(ctx context.Context) error {
	t.logHead(ctx, "start")
	tick := time.NewTicker(auditPollInterval)
	defer tick.Stop()
	lastTrim := time.Time{}
	for {
		select {
		case <-ctx.Done():
			t.logHead(context.WithoutCancel(ctx), "shutdown")
			return nil
		case <-tick.C:
		}
		if _, head, err := t.store.AuditHeads(ctx); err == nil && head.Seq >= t.logged+t.every {
			t.logHead(ctx, fmt.Sprintf("every %d entries", t.every))
		}
		if t.keep > 0 && time.Since(lastTrim) > time.Hour && (t.leading == nil || t.leading()) {
			lastTrim = time.Now()
			if n, err := t.store.TrimAudit(ctx, time.Now().Add(-t.keep)); err != nil {
				t.log.Error("audit: retention", "err", err)
			} else if n > 0 {
				t.log.Info("audit: retention dropped the oldest entries", "entries", n)
			}
		}
	}
}
