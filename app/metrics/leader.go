package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Leadership is a replica's side of a pair on one database: whether it
// leads now, and how often that changed since it started.
type Leadership struct {
	leader  prometheus.Gauge
	changes prometheus.Counter
	mu      sync.Mutex
	leads   bool
}

// WatchLeadership adds appliance_leader and
// appliance_leadership_changes_total; a lone server never calls it.
func (r *Registry) WatchLeadership() *Leadership {
	l := &Leadership{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "appliance_leader",
			Help: "1 while this replica leads (runs the orchestrator, scheduler and workers), 0 while it follows."}),
		changes: prometheus.NewCounter(prometheus.CounterOpts{Name: "appliance_leadership_changes_total",
			Help: "Times this replica started or stopped leading."}),
	}
	r.reg.MustRegister(l.leader, l.changes)
	return l
}

// Set records whether this replica leads; a change counts once.
func (l *Leadership) Set(leads bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leads == leads {
		return
	}
	l.leads = leads
	l.changes.Inc()
	v := 0.0
	if leads {
		v = 1
	}
	l.leader.Set(v)
}
