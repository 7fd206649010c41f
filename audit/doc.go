// Package audit is the audit trail of the tools/call requests a server
// receives: one Event per call once it is over (answered, failed, cancelled,
// lost) and one per call the server refused, written as JSON lines (JSONLines,
// File) or as OpenTelemetry log records (OTel) by a Trail, which never blocks
// the call that records an event.
//
// An Event holds who called what, when, how it ended and how many bytes went
// each way; never a credential (the principal is the name the authentication
// gave), a session id, a resume token, a call key or a task id. A call's
// arguments are in its event only when a Rules entry names its tool: hashed,
// redacted (keys kept) or kept as sent.
//
// mcp.Options.Audit is where a server tells of its calls; docs/observability.md
// ("Audit trail") lists every field written.
//
//	trail := audit.NewTrail(nil, audit.JSONLines(os.Stdout))
//	defer trail.Close()
//	core, err := mcp.New(srv, &mcp.Options{Audit: trail.Record})
package audit
