package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Audit is the audit trail's figures: the chain's last logged head, the
// requests refused by route, and the entries the bounded queue dropped.
type Audit struct {
	head    *prometheus.GaugeVec
	denied  *prometheus.CounterVec
	dropped prometheus.CounterFunc
}

// WatchAudit adds appliance_audit_head (its value the sequence number,
// its mac label the MAC, one series: the last head logged),
// appliance_denied_requests_total{route} and
// appliance_audit_dropped_total (read from dropped).
func (r *Registry) WatchAudit(dropped func() int64) *Audit {
	a := &Audit{
		head: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "appliance_audit_head",
			Help: "The audit chain's head as last logged: the value is its sequence number, the mac label its MAC; a verify of the trail must reach it."}, []string{"mac"}),
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "appliance_denied_requests_total",
			Help: "Requests refused with 403, by route."}, []string{"route"}),
		dropped: prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "appliance_audit_dropped_total",
			Help: "Audit entries of denied or failed requests dropped because the queue was full (each gap is noted in the next entry)."},
			func() float64 { return float64(dropped()) }),
	}
	r.reg.MustRegister(a.head, a.denied, a.dropped)
	return a
}

// Head records a logged head.
func (a *Audit) Head(seq int64, mac string) {
	a.head.Reset()
	a.head.WithLabelValues(mac).Set(float64(seq))
}

// Denied counts a refused request of route ("METHOD /path/:param").
func (a *Audit) Denied(route string) { a.denied.WithLabelValues(route).Inc() }
