package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// PoolStats are a database connection pool's figures at one moment. The
// server fills them from the PostgreSQL store's pool (this package does
// not import the store).
type PoolStats struct {
	InUse, Idle, Max int32
	Waits            int64         // acquisitions that found no idle connection and waited
	WaitTime         time.Duration // the total time those waited
}

// PoolFunc reads the pool's figures; it must be cheap (it runs at each scrape).
type PoolFunc func() PoolStats

// WatchPool adds the database pool's series, read at each scrape: a server
// whose requests queue for connections shows it here (waits rising while
// in use stays at max) before it shows it in latency. Call it once, before
// serving; a server on bbolt has no pool and never calls it.
func (r *Registry) WatchPool(stats PoolFunc) {
	r.reg.MustRegister(newPoolCollector(stats))
}

type poolCollector struct {
	stats                                PoolFunc
	inUse, idle, max, waits, waitSeconds *prometheus.Desc
}

func newPoolCollector(stats PoolFunc) *poolCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &poolCollector{
		stats:       stats,
		inUse:       d("appliance_db_connections_in_use", "Database connections held by a query or transaction now."),
		idle:        d("appliance_db_connections_idle", "Open database connections waiting in the pool."),
		max:         d("appliance_db_connections_max", "The pool's size (storage.max_conns)."),
		waits:       d("appliance_db_connection_waits_total", "Times a query waited for a connection because every one was in use."),
		waitSeconds: d("appliance_db_connection_wait_seconds_total", "Total time queries waited for a connection."),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.inUse, c.idle, c.max, c.waits, c.waitSeconds} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(s.InUse))
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(s.Idle))
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(s.Max))
	ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(s.Waits))
	ch <- prometheus.MustNewConstMetric(c.waitSeconds, prometheus.CounterValue, s.WaitTime.Seconds())
}
