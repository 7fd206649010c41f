// Package metrics exports a resume engine's state in the Prometheus exposition
// format: live requests by state, attached and detached, queued bytes,
// tombstones, and the resume, expiry and token-failure counters
// (resume.Engine.Stats, read at each scrape; nothing is counted twice and the
// engine keeps no Prometheus types).
//
//	http.Handle("/metrics", metrics.Handler(core.Engine()))
package metrics
