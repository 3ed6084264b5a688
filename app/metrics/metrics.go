// Package metrics exposes the server's Prometheus series: it adapts the
// orchestrator's observer (engine.Metrics) and snapshot (engine.Stats), the
// scheduler's lateness and the log store's volume to client_golang, so the
// engine itself stays free of Prometheus.
// It must not import store or api.
package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/appliance-sh/appliance/engine"
)

// StatsFunc snapshots the orchestrator's live state; *engine.Engine's
// Stats implements it.
type StatsFunc func(ctx context.Context) (engine.Stats, error)

// statsTimeout bounds a scrape's wait for the orchestrator loop.
const statsTimeout = 2 * time.Second

// Registry holds the server's series. Its methods are safe for concurrent use.
type Registry struct {
	reg *prometheus.Registry

	jobsCreated  *prometheus.CounterVec
	jobsEnded    *prometheus.CounterVec
	stepsEnded   *prometheus.CounterVec
	stepDuration *prometheus.HistogramVec
	// byStatus holds each known step status's series, resolved once, so
	// a step ending costs no label lookup.
	byStatus map[string]stepSeries

	claimWait      prometheus.Histogram
	claimAnswer    prometheus.Histogram
	commitDuration prometheus.Histogram
	commitCommands prometheus.Histogram
	commitRecords  prometheus.Histogram
	logBytes       prometheus.Counter
	schedulerLag   prometheus.Histogram
	archivePending prometheus.Gauge
	queueWait      *prometheus.HistogramVec
}

type stepSeries struct {
	ended    prometheus.Counter
	duration prometheus.Observer
}

var (
	_ engine.Metrics      = (*Registry)(nil)
	_ engine.QueueMetrics = (*Registry)(nil)
)

// New registers every series, the Go runtime and process collectors, and
// the live-state gauges read from stats at each scrape.
func New(stats StatsFunc) *Registry {
	r := &Registry{
		reg: prometheus.NewRegistry(),
		jobsCreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "appliance_jobs_created_total",
			Help: "Jobs created, by workspace, task and source type (api, user, trigger, webhook, hook, task).",
		}, []string{"workspace", "task", "source_type"}),
		jobsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "appliance_jobs_ended_total",
			Help: "Jobs that reached a terminal status, by status.",
		}, []string{"status"}),
		stepsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "appliance_steps_ended_total",
			Help: "Steps (and for_each instances) that reached a terminal status, by status.",
		}, []string{"status"}),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "appliance_step_duration_seconds",
			Help:    "How long ended steps ran, from start to end, by status (0 for a step that never started).",
			Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"status"}),
		claimWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "appliance_step_claim_wait_seconds",
			Help:    "How long a step waited ready before a worker claimed it.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300},
		}),
		claimAnswer: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "appliance_worker_claim_seconds",
			Help:    "How long a remote worker's claim of several took to hand it steps, from its arrival to its answer (the claim's commit included; a claim that long-polled for work counts its wait).",
			Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 5, 30},
		}),
		commitDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "appliance_commit_duration_seconds",
			Help:    "How long each group commit of the orchestrator took (one synced bbolt transaction).",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1},
		}),
		commitCommands: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "appliance_commit_batch_commands",
			Help:    "Commands (requests, timer events) grouped into each commit.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11), // 1 .. 1024 (the batch cap)
		}),
		commitRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "appliance_commit_batch_records",
			Help:    "Records (jobs, steps, workers) written by each commit.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 9), // 1 .. 65536
		}),
		logBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "appliance_log_appended_bytes_total",
			Help: "Bytes of log line text appended to job logs (after masking).",
		}),
		schedulerLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "appliance_scheduler_lag_seconds",
			Help:    "How late each scheduler trigger fired after its slot (a fire caught up after downtime counts the downtime).",
			Buckets: []float64{0.001, 0.01, 0.1, 1, 10, 60, 600, 3600},
		}),
		archivePending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "appliance_log_archive_pending",
			Help: "Local job logs past retention.logs that the last sweep kept because the archive does not hold them yet.",
		}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "appliance_queue_wait_seconds",
			Help:    "How long queued jobs waited for a slot before they started, by queue (a named queue, or workspace/task for a task's own limit).",
			Buckets: []float64{0.01, 0.1, 1, 5, 10, 30, 60, 300, 900, 3600, 14400},
		}, []string{"queue"}),
	}
	r.byStatus = map[string]stepSeries{}
	for _, s := range []string{engine.StepCompleted, engine.StepFailed, engine.StepSkipped, engine.StepCancelled} {
		r.byStatus[s] = stepSeries{ended: r.stepsEnded.WithLabelValues(s), duration: r.stepDuration.WithLabelValues(s)}
	}
	r.reg.MustRegister(
		r.jobsCreated, r.jobsEnded, r.stepsEnded, r.stepDuration, r.claimWait, r.claimAnswer,
		r.commitDuration, r.commitCommands, r.commitRecords, r.logBytes, r.schedulerLag, r.archivePending, r.queueWait,
		newStatsCollector(stats),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return r
}

// Handler serves the series in the Prometheus text format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{})
}

func (r *Registry) JobCreated(workspace, task, sourceType string) {
	r.jobsCreated.WithLabelValues(workspace, task, sourceType).Inc()
}

func (r *Registry) JobEnded(status string) { r.jobsEnded.WithLabelValues(status).Inc() }

func (r *Registry) StepEnded(status string, ran time.Duration) {
	s, ok := r.byStatus[status]
	if !ok {
		s = stepSeries{ended: r.stepsEnded.WithLabelValues(status), duration: r.stepDuration.WithLabelValues(status)}
	}
	s.ended.Inc()
	s.duration.Observe(ran.Seconds())
}

// QueueWaited observes a queued job's wait for its slots.
func (r *Registry) QueueWaited(queue string, waited time.Duration) {
	r.queueWait.WithLabelValues(queue).Observe(waited.Seconds())
}

func (r *Registry) StepClaimed(waited time.Duration) { r.claimWait.Observe(waited.Seconds()) }

// ClaimAnswered observes how long a remote worker's claim of several took
// to hand it steps.
func (r *Registry) ClaimAnswered(took time.Duration) { r.claimAnswer.Observe(took.Seconds()) }

func (r *Registry) Committed(commands, records int, took time.Duration) {
	r.commitDuration.Observe(took.Seconds())
	r.commitCommands.Observe(float64(commands))
	r.commitRecords.Observe(float64(records))
}

// LogAppended counts n bytes of log text appended.
func (r *Registry) LogAppended(n int) { r.logBytes.Add(float64(n)) }

// SchedulerLate records how late a trigger fired.
// LogArchivePending sets how many old local logs retention keeps for the archive.
func (r *Registry) LogArchivePending(n int) { r.archivePending.Set(float64(n)) }

func (r *Registry) SchedulerLate(d time.Duration) { r.schedulerLag.Observe(d.Seconds()) }
