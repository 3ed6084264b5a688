package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// statsCollector reads the orchestrator's live state at each scrape: the
// loop owns that state, so one snapshot per scrape costs the loop nothing
// per step.
type statsCollector struct {
	stats                                              StatsFunc
	up, liveJobs, ready, parked, workers, runningSteps *prometheus.Desc
	queued                                             *prometheus.Desc
}

func newStatsCollector(stats StatsFunc) *statsCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &statsCollector{
		stats:        stats,
		up:           d("appliance_orchestrator_up", "1 if the orchestrator loop answered this scrape, else 0 (and the live-state gauges are absent)."),
		liveJobs:     d("appliance_jobs_live", "Jobs not yet ended."),
		ready:        d("appliance_steps_ready", "Steps ready and waiting for a worker (the queue depth)."),
		parked:       d("appliance_claims_parked", "Worker claims waiting for a step."),
		workers:      d("appliance_workers_active", "Workers whose heartbeat is current (in-process pool included)."),
		runningSteps: d("appliance_steps_running", "Steps held by workers."),
		queued: prometheus.NewDesc("appliance_queued_jobs",
			"Jobs waiting for a slot, by queue (a named queue, or workspace/task for a task's own limit).", []string{"queue"}, nil),
	}
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.liveJobs, c.ready, c.parked, c.workers, c.runningSteps, c.queued} {
		ch <- d
	}
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	s, err := c.stats(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(c.liveJobs, prometheus.GaugeValue, float64(s.LiveJobs))
	ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, float64(s.ReadySteps))
	ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(s.ParkedClaims))
	ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(s.ActiveWorkers))
	ch <- prometheus.MustNewConstMetric(c.runningSteps, prometheus.GaugeValue, float64(s.RunningSteps))
	for queue, n := range s.Queued {
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(n), queue)
	}
}
