package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcp-resume/mcp-resume/resume"
)

// Collector is a prometheus.Collector of one engine's Stats, or of several
// (a gateway of several upstreams: one engine per endpoint). It is safe for
// concurrent use.
type Collector struct {
	engs  []Endpoint
	label bool // each metric has the label upstream

	requests, tasks, attached, detached, queued, tombstones *prometheus.Desc
	resumes, expired, evicted, tokenFailures, unreadable    *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// Endpoint is an engine and the upstream whose endpoint it serves ("" for a
// gateway's aggregated one).
type Endpoint struct {
	Upstream string
	Engine   *resume.Engine
}

// NewCollector returns a Collector of eng.
func NewCollector(eng *resume.Engine) *Collector {
	return newCollector([]Endpoint{{Engine: eng}}, false)
}

// NewEndpointsCollector returns a Collector of several engines, each metric
// labelled upstream with its Endpoint's.
func NewEndpointsCollector(engs []Endpoint) *Collector { return newCollector(engs, true) }

func newCollector(engs []Endpoint, label bool) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		if label {
			labels = append(labels, "upstream")
		}
		return prometheus.NewDesc("mcp_resume_"+name, help, labels, nil)
	}
	return &Collector{
		engs: engs, label: label,
		requests:      d("requests", "Live resumable requests, by state.", "state"),
		tasks:         d("tasks", "Live tasks (among the requests), by state.", "state"),
		attached:      d("requests_attached", "Live resumable requests whose messages go to a client's stream now."),
		detached:      d("requests_detached", "Live resumable requests with no client (their maxWait or retention clock runs), results already written to their client included."),
		queued:        d("queued_bytes", "Size of the queued messages of every live request."),
		tombstones:    d("tombstones", "Ended requests still answered expired or cancelled."),
		resumes:       d("resumes_total", "Requests attached to a stream again: requests/resume, and Last-Event-ID reconnects on Streamable HTTP."),
		expired:       d("expired_total", "Requests that ended expired: no client within maxWait, a result unacknowledged past its retention, or released past max-retained."),
		evicted:       d("evicted_total", "Results released before their retention ended, the oldest first, to keep the server within max-retained or max-queued-bytes (among expired_total)."),
		tokenFailures: d("token_failures_total", "Lookups by token answered not_found: a wrong token or id, another principal's token, or a request long gone."),
		unreadable:    d("unreadable_records_total", "Stored records skipped because the store could not decode them, counted at each listing (recovery, each claim sweep after an instance is lost); they stay in the store."),
	}
}

// Describe sends the descriptors of every metric.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.requests, c.tasks, c.attached, c.detached, c.queued, c.tombstones, c.resumes, c.expired, c.evicted, c.tokenFailures, c.unreadable} {
		ch <- d
	}
}

// Collect sends the engines' current values.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range c.engs {
		c.collect(ch, e)
	}
}

func (c *Collector) collect(ch chan<- prometheus.Metric, e Endpoint) {
	st := e.Engine.Stats()
	var own []string
	if c.label {
		own = []string{e.Upstream}
	}
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), append(labels, own...)...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), own...)
	}
	gauge(c.requests, st.Processing, "processing")
	gauge(c.requests, st.Completed, "completed")
	gauge(c.requests, st.Failed, "failed")
	gauge(c.tasks, st.TasksProcessing, "processing")
	gauge(c.tasks, st.TasksCompleted, "completed")
	gauge(c.tasks, st.TasksFailed, "failed")
	gauge(c.attached, st.Attached)
	gauge(c.detached, st.Detached)
	gauge(c.queued, st.QueuedBytes)
	gauge(c.tombstones, st.Tombstones)
	counter(c.resumes, st.Attaches)
	counter(c.expired, st.Expired)
	counter(c.evicted, st.Evicted)
	counter(c.tokenFailures, st.TokenFailures)
	counter(c.unreadable, st.Unreadable)
}

// Handler serves /metrics: eng's Collector, extra collectors (a StoreTimer), and
// the Go runtime's and the process's metrics, on a registry of its own.
func Handler(eng *resume.Engine, extra ...prometheus.Collector) http.Handler {
	return HandlerOf(NewCollector(eng), extra...)
}

// HandlerOf is Handler for a Collector of one engine or several.
func HandlerOf(c *Collector, extra ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(extra...)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}
