package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/testkit/otlptest"
)

// spansOfEveryKind returns ended spans that use every part of the OTLP span:
// every attribute type, events and links with attributes, remote and local
// parents, trace states, statuses, dropped counts, two scopes (one with
// attributes) of one resource.
func spansOfEveryKind(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.30.0", attribute.String("service.name", "enc"), attribute.Int("pid", 42))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res),
		sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{AttributeCountLimit: 24, EventCountLimit: 2, LinkCountLimit: 1,
			AttributeValueLengthLimit: -1, AttributePerEventCountLimit: 8, AttributePerLinkCountLimit: 8}))
	a := tp.Tracer("scope-a", trace.WithInstrumentationVersion("1.2.3"), trace.WithInstrumentationAttributes(attribute.Bool("scoped", true)))
	b := tp.Tracer("scope-b", trace.WithSchemaURL("https://example.com/schema"))
	ts, _ := trace.ParseTraceState("vendor=x,other=y")
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
	linked := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}, SpanID: trace.SpanID{8, 8, 8, 8, 8, 8, 8, 8}, TraceState: ts, Remote: true})
	ctx, root := a.Start(trace.ContextWithRemoteSpanContext(context.Background(), remote), "tools/call countdown",
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithLinks(trace.Link{SpanContext: linked, Attributes: []attribute.KeyValue{attribute.String("why", "resume")}},
			trace.Link{SpanContext: linked}), // over the limit: dropped
		trace.WithAttributes(
			attribute.String("s", "text"), attribute.String("empty", ""), attribute.Bool("f", false), attribute.Bool("t", true),
			attribute.Int64("zero", 0), attribute.Int64("neg", -7), attribute.Int64("big", 1<<40), attribute.Float64("pi", 3.25), attribute.Float64("fz", 0),
			attribute.StringSlice("ss", []string{"a", "", "c"}), attribute.IntSlice("is", []int{1, -2}), attribute.BoolSlice("bs", []bool{true, false}),
			attribute.Float64Slice("fs", []float64{0.5}), attribute.ByteSlice("raw", []byte{0, 1, 2}),
			attribute.Slice("mixed", attribute.StringValue("x"), attribute.IntValue(3)),
			attribute.Map("m", attribute.String("k", "v"), attribute.Bool("b", true)),
			attribute.String("", "no key"),
		))
	root.AddEvent("mcp_resume.resumable", trace.WithAttributes(attribute.Bool("mcp_resume.task", false)))
	root.AddEvent("mcp_resume.detached")
	root.AddEvent("mcp_resume.attached", trace.WithAttributes(attribute.Int64("mcp_resume.ack", 3))) // over the limit: the oldest dropped
	root.SetStatus(codes.Error, "the tool's result is an error")
	_, child := a.Start(ctx, "requests/resume", trace.WithSpanKind(trace.SpanKindInternal))
	child.SetStatus(codes.Ok, "")
	child.End()
	root.End()
	_, other := b.Start(context.Background(), "tools/list", trace.WithSpanKind(trace.SpanKindClient))
	other.End()
	_, plain := a.Start(context.Background(), "ping")
	plain.End()
	spans := rec.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans", len(spans))
	}
	return spans
}

// What the exporter sends decodes, with the collector's pdata, to exactly
// what the official exporter's request decodes to (but a link's trace state,
// which the official one leaves out).
func TestEncodeAsOfficial(t *testing.T) {
	spans := spansOfEveryKind(t)
	ours, theirs := otlptest.New(t), otlptest.New(t)
	exp := newHTTPExporter(httpConfig{url: ours.Endpoint() + "/v1/traces", timeout: 10 * time.Second})
	official, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(theirs.Endpoint()+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []sdktrace.SpanExporter{exp, official} {
		if err := e.ExportSpans(context.Background(), spans); err != nil {
			t.Fatal(err)
		}
		if err := e.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	got, want := ours.Raw(), theirs.Raw()
	// The one difference: OTLP's Link has a trace_state, which the official
	// exporter leaves out, and this one writes.
	linkState := []byte(`"spanId":"0808080808080808","traceState":"vendor=x,other=y",`)
	if !bytes.Contains(got, linkState) {
		t.Errorf("the link's trace state is not in our request")
	}
	got = bytes.ReplaceAll(got, linkState, []byte(`"spanId":"0808080808080808",`))
	if len(want) == 0 || !bytes.Equal(got, want) {
		t.Fatalf("our request decodes to\n%s\nthe official one to\n%s", got, want)
	}
	// Again, on the same buffers: nothing of the first batch is left in them.
	exp2 := newHTTPExporter(httpConfig{url: ours.Endpoint() + "/v1/traces", timeout: 10 * time.Second})
	if err := exp2.ExportSpans(context.Background(), spans[2:]); err != nil {
		t.Fatal(err)
	}
	if err := exp2.ExportSpans(context.Background(), spans[:1]); err != nil {
		t.Fatal(err)
	}
	if n := len(ours.Spans()); n != 4+3 {
		t.Fatalf("received %d spans, want 7", n)
	}
}

// The endpoint, headers, timeout and compression are read as the official
// exporter reads them; what only it does leaves the export to it.
func TestHTTPConfigFromEnv(t *testing.T) {
	for name, c := range map[string]struct {
		env  map[string]string
		ok   bool
		want httpConfig
	}{
		"base endpoint": {env: map[string]string{EnvEndpoint: "http://collector:4318"}, ok: true,
			want: httpConfig{url: "http://collector:4318/v1/traces", timeout: 10 * time.Second}},
		"base endpoint with a path": {env: map[string]string{EnvEndpoint: "https://collector/otlp/"}, ok: true,
			want: httpConfig{url: "https://collector/otlp/v1/traces", timeout: 10 * time.Second}},
		"traces endpoint as it is": {env: map[string]string{EnvEndpoint: "http://a:1", EnvTracesEndpoint: "http://b:2/x"}, ok: true,
			want: httpConfig{url: "http://b:2/x", timeout: 10 * time.Second}},
		"headers, timeout, gzip": {env: map[string]string{EnvEndpoint: "http://c:1", envHeaders: "a=1", envTracesHeaders: " Api-Key = s%20cret ,bad, =x",
			envTimeout: "5", envTracesTimeout: "2500", envCompression: "gzip"}, ok: true,
			want: httpConfig{url: "http://c:1/v1/traces", timeout: 2500 * time.Millisecond, gzip: true, header: http.Header{"Api-Key": {"s cret"}}}},
		"no endpoint: the official default": {env: map[string]string{EnvExporter: "otlp"}},
		"no scheme":                         {env: map[string]string{EnvEndpoint: "collector:4318"}},
		"a certificate":                     {env: map[string]string{EnvEndpoint: "https://c", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/ca.pem"}},
		"a client key":                      {env: map[string]string{EnvEndpoint: "https://c", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY": "/k.pem"}},
		"another compression":               {env: map[string]string{EnvEndpoint: "http://c", envCompression: "zstd"}},
		"a bad timeout":                     {env: map[string]string{EnvEndpoint: "http://c", envTimeout: "soon"}},
	} {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			for _, k := range append([]string{envHeaders, envTracesHeaders, envTimeout, envTracesTimeout, envCompression, envTracesCompression}, envOfficialOnly...) {
				t.Setenv(k, "")
			}
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			got, ok := httpConfigFromEnv()
			if ok != c.ok {
				t.Fatalf("ok %v, want %v (%+v)", ok, c.ok, got)
			}
			if !ok {
				return
			}
			if c.want.header == nil {
				c.want.header = http.Header{}
			}
			if got.url != c.want.url || got.timeout != c.want.timeout || got.gzip != c.want.gzip || len(got.header) != len(c.want.header) ||
				got.header.Get("Api-Key") != c.want.header.Get("Api-Key") {
				t.Fatalf("config %+v, want %+v", got, c.want)
			}
		})
	}
}

// A 503 (Retry-After 0) is tried again; a 400 is an error at once; the
// headers go with every request, the body gzipped when asked.
func TestHTTPExporterRetries(t *testing.T) {
	var calls atomic.Int32
	var bad atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		zr, err := gzip.NewReader(r.Body)
		if err != nil || r.Header.Get("Api-Key") != "k" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want the key and a gzipped protobuf body", http.StatusTeapot)
			return
		}
		if b, err := io.ReadAll(zr); err != nil || len(b) == 0 {
			http.Error(w, "empty", http.StatusTeapot)
			return
		}
		switch {
		case bad.Load():
			http.Error(w, "no", http.StatusBadRequest)
		case n == 1:
			w.Header().Set("Retry-After", "0")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	exp := newHTTPExporter(httpConfig{url: srv.URL, timeout: 5 * time.Second, gzip: true, header: http.Header{"Api-Key": {"k"}}})
	exp.retryFirst = 10 * time.Millisecond
	defer func() { _ = exp.Shutdown(context.Background()) }()
	spans := spansOfEveryKind(t)
	if err := exp.ExportSpans(context.Background(), spans); err != nil || calls.Load() != 2 {
		t.Fatalf("export: %v after %d requests; want success on the second", err, calls.Load())
	}
	bad.Store(true)
	if err := exp.ExportSpans(context.Background(), spans); err == nil || calls.Load() != 3 {
		t.Fatalf("export to a collector that answers 400: %v after %d requests; want an error, not tried again", err, calls.Load())
	}
}

// Shutdown ends an export in flight (a collector that does not answer),
// and the exports after it do nothing.
func TestHTTPExporterShutdown(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	exp := newHTTPExporter(httpConfig{url: srv.URL, timeout: time.Minute})
	done := make(chan error, 1)
	go func() { done <- exp.ExportSpans(context.Background(), spansOfEveryKind(t)) }()
	time.Sleep(50 * time.Millisecond) // the request is on its way (a shutdown before it is as good)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the export in flight did not end with the shutdown")
	}
	if err := exp.ExportSpans(context.Background(), spansOfEveryKind(t)); err != nil {
		t.Fatalf("an export after the shutdown: %v", err)
	}
}

// Setup exports with this exporter when the environment is one it covers,
// and with the official one otherwise.
func TestSetupChoosesExporter(t *testing.T) {
	for name, c := range map[string]struct {
		env  map[string]string
		ours bool
	}{
		"endpoint":             {env: map[string]string{EnvEndpoint: "http://127.0.0.1:1"}, ours: true},
		"certificate":          {env: map[string]string{EnvEndpoint: "https://127.0.0.1:1", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent.pem"}},
		"no endpoint":          {env: map[string]string{EnvExporter: "otlp"}},
		"grpc: not this one's": {env: map[string]string{EnvEndpoint: "http://127.0.0.1:1", EnvProtocol: "grpc"}},
	} {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			for _, k := range envOfficialOnly {
				t.Setenv(k, "")
			}
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			tr, err := Setup(context.Background(), "mcp-resume", "v", nil)
			if err != nil || tr == nil {
				t.Fatalf("Setup: %v, %v", tr, err)
			}
			defer func() { _ = tr.Shutdown(context.Background()) }()
			if got := tr.exporter == "mcp-resume"; got != c.ours {
				t.Fatalf("exporter %q; want ours: %v", tr.exporter, c.ours)
			}
		})
	}
}

// BenchmarkExport: a batch of 512 spans like the core's (a tools/call's
// SERVER span and its nine attributes) exported over HTTP to a collector that
// reads and drops it, by this exporter and by the official one.
func BenchmarkExport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := tp.Tracer("github.com/mcp-resume/mcp-resume/mcp")
	for i := range 512 {
		_, s := tr.Start(context.Background(), "tools/call echo", trace.WithSpanKind(trace.SpanKindServer))
		s.SetAttributes(attribute.String("mcp.method.name", "tools/call"), attribute.Int("jsonrpc.request.id", i),
			attribute.String("gen_ai.tool.name", "echo"), attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("mcp.protocol.version", "2025-06-18"), attribute.String("mcp.session.id", "71c43643-80a0-4f2b-b04d-80c16dee2085"),
			attribute.String("network.transport", "tcp"), attribute.String("network.protocol.name", "http"), attribute.String("client.address", "127.0.0.1"))
		s.End()
	}
	spans := rec.Ended()
	official, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		exp  sdktrace.SpanExporter
	}{{"exporter=ours", newHTTPExporter(httpConfig{url: srv.URL + "/v1/traces", timeout: 10 * time.Second})}, {"exporter=official", official}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.exp.ExportSpans(context.Background(), spans); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
		})
		_ = c.exp.Shutdown(context.Background())
	}
}

// The collector's headers go to its endpoint only: a collector answering a
// redirect to another origin (307, which would keep the POST and its
// headers) fails the export, and nothing reaches the other origin.
func TestHTTPExporterFollowsNoRedirect(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/v1/traces", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	exp := newHTTPExporter(httpConfig{url: srv.URL, timeout: 5 * time.Second, header: http.Header{"Api-Key": {"k"}}})
	defer func() { _ = exp.Shutdown(context.Background()) }()
	if err := exp.ExportSpans(context.Background(), spansOfEveryKind(t)); err == nil {
		t.Fatal("an export answered with a redirect succeeded")
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the redirect's origin got %d requests with the collector's headers", n)
	}
}
