package audit

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/trace"
)

// EventName is the event name of the log records OTel emits.
const EventName = "mcp_resume.audit"

// instrumentation names the logger OTel's records come from.
const instrumentation = "github.com/mcp-resume/mcp-resume/audit"

// OTel returns a Sink emitting each event as an OpenTelemetry log record of
// lp's: event name EventName, timestamp the event's End, severity INFO (WARN
// for refused and lost), trace and span id the call's span's, and each other
// field an attribute named as in the JSON form (start as RFC 3339 text,
// bytes as integers, arguments as JSON text). The provider's processor
// exports them (the binary's: a batch processor over OTLP); flushing and
// shutting it down is its owner's.
func OTel(lp log.LoggerProvider) Sink {
	return otelSink{l: lp.Logger(instrumentation)}
}

type otelSink struct{ l log.Logger }

func (o otelSink) Write(e Event) error {
	var r log.Record
	r.SetEventName(EventName)
	r.SetTimestamp(e.End)
	r.SetObservedTimestamp(time.Now())
	sev := log.SeverityInfo
	if e.Outcome == Refused || e.Outcome == Lost {
		sev = log.SeverityWarn
	}
	r.SetSeverity(sev)
	attrs := make([]attribute.KeyValue, 0, 14)
	attrs = append(attrs,
		attribute.String("start", e.Start.UTC().Format(time.RFC3339Nano)),
		attribute.String("end", e.End.UTC().Format(time.RFC3339Nano)),
		attribute.String("tool", e.Tool),
		attribute.String("request_id", e.RequestID),
		attribute.String("outcome", string(e.Outcome)),
		attribute.Int64("bytes_in", e.BytesIn),
		attribute.Int64("bytes_out", e.BytesOut))
	for _, kv := range [...]struct{ k, v string }{
		{"principal", e.Principal}, {"trace_id", e.TraceID}, {"span_id", e.SpanID},
		{"transport", e.Transport}, {"protocol_version", e.ProtocolVersion},
		{"reason", e.Reason}, {"arguments_sha256", e.ArgumentsSHA256}, {"arguments", string(e.Arguments)},
	} {
		if kv.v != "" {
			attrs = append(attrs, attribute.String(kv.k, kv.v))
		}
	}
	r.AddAttributes(attrs...)
	o.l.Emit(spanContext(e), r)
	return nil
}

// spanContext returns a context carrying the event's span, for the record's
// trace and span ids.
func spanContext(e Event) context.Context {
	ctx := context.Background()
	tid, err := trace.TraceIDFromHex(e.TraceID)
	if err != nil {
		return ctx
	}
	sid, _ := trace.SpanIDFromHex(e.SpanID)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithSpanContext(ctx, sc)
}
