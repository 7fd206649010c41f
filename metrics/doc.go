// Package metrics exports a resume engine's state in the Prometheus exposition
// format: live requests by state, attached and detached, queued bytes,
// tombstones, and the resume, expiry and token-failure counters
// (resume.Engine.Stats, read at each scrape; nothing is counted twice and the
// engine keeps no Prometheus types). Operations is the requests' duration
// histogram of the OpenTelemetry semantic conventions for MCP
// (mcp.server.operation.duration), fed by mcp.Options.OnOperation, in the
// Prometheus format; OTelOperations records it with an OpenTelemetry meter.
// ClientOperations and OTelClientOperations do the same for the requests a
// client sends (mcp.client.operation.duration), fed by
// client.Options.OnOperation or gateway.Options.OnOperation.
//
//	ops := metrics.NewOperations()
//	core, err := mcp.New(srv, &mcp.Options{OnOperation: ops.Observe})
//	http.Handle("/metrics", metrics.Handler(core.Engine(), ops))
package metrics
