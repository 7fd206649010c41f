// Package otlptest is an OTLP trace receiver for tests: a real endpoint, over
// HTTP (POST /v1/traces, protobuf or JSON, gzipped or not) or gRPC, that
// decodes what an exporter sends with the collector's pdata and keeps the
// spans for assertions. Over HTTP it receives metrics too (POST /v1/metrics):
// their histograms' data points; and logs (POST /v1/logs, and over gRPC):
// their records.
package otlptest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
)

// Span is one span received, flattened for assertions: ids in hex, attribute
// values as strings.
type Span struct {
	Service                       string // the resource's service.name
	Resource                      map[string]string
	TraceID, SpanID, ParentSpanID string // "" for a root span's parent
	TraceState                    string
	Name                          string
	Kind                          string // Server, Client, Internal, Producer, Consumer
	Attrs                         map[string]string
	Events                        []Event
	Links                         []Link
	StatusCode                    string // Unset, Ok, Error
	StatusMessage                 string
	Start, End                    time.Time
}

// Event is a span event.
type Event struct {
	Name  string
	Time  time.Time
	Attrs map[string]string
}

// Link is a span link.
type Link struct {
	TraceID, SpanID string
	Attrs           map[string]string
}

// Receiver collects the spans exported to it. Its methods are safe for
// concurrent use.
type Receiver struct {
	endpoint string

	mu      sync.Mutex // guards the fields below
	spans   []Span
	points  []Point       // the histograms' data points received
	logs    []LogRecord   // the log records received
	raw     [][]byte      // every export request received, as OTLP JSON
	changed chan struct{} // closed (and replaced) when spans arrive
}

// New starts a receiver of OTLP over HTTP on loopback; the test's cleanup
// stops it.
func New(t testing.TB) *Receiver {
	r := &Receiver{changed: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(r.serveHTTP))
	t.Cleanup(srv.Close)
	r.endpoint = srv.URL
	return r
}

// NewGRPC starts a receiver of OTLP over gRPC on loopback; the test's cleanup
// stops it.
func NewGRPC(t testing.TB) *Receiver {
	r := &Receiver{changed: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(s, &grpcReceiver{r: r})
	plogotlp.RegisterGRPCServer(s, &grpcLogReceiver{r: r})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(ln)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	r.endpoint = "http://" + ln.Addr().String()
	return r
}

// Endpoint is the receiver's base URL, for OTEL_EXPORTER_OTLP_ENDPOINT (an
// HTTP exporter appends /v1/traces to it).
func (r *Receiver) Endpoint() string { return r.endpoint }

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" && req.URL.Path != "/v1/metrics" && req.URL.Path != "/v1/logs" {
		http.Error(w, "want POST /v1/traces, /v1/metrics or /v1/logs", http.StatusNotFound)
		return
	}
	b, err := ReadBody(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	jsonBody := req.Header.Get("Content-Type") == "application/json"
	switch req.URL.Path {
	case "/v1/metrics":
		r.serveMetrics(w, b, jsonBody)
		return
	case "/v1/logs":
		r.serveLogs(w, b, jsonBody)
		return
	}
	er := ptraceotlp.NewExportRequest()
	if !decode(w, er, b, jsonBody) {
		return
	}
	r.add(er)
	resp := ptraceotlp.NewExportResponse()
	respond(w, jsonBody, resp.MarshalJSON, resp.MarshalProto)
}

// decode decodes b, an export request's body (OTLP JSON or protobuf), into
// er; it answers 400 and reports false when b is neither.
func decode(w http.ResponseWriter, er interface {
	UnmarshalJSON([]byte) error
	UnmarshalProto([]byte) error
}, b []byte, jsonBody bool) bool {
	var err error
	if jsonBody {
		err = er.UnmarshalJSON(b)
	} else {
		err = er.UnmarshalProto(b)
	}
	if err != nil {
		http.Error(w, "decoding the export request: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

// ReadBody reads the body of an OTLP/HTTP export request, gunzipped when its
// Content-Encoding is gzip (an exporter's compression). It serves a receiver
// of one's own too, such as a benchmark's sink that keeps exports undecoded.
func ReadBody(req *http.Request) ([]byte, error) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			return nil, err
		}
		body = zr
	}
	return io.ReadAll(body)
}

// respond writes an export response, in JSON or protobuf as the request was.
func respond(w http.ResponseWriter, jsonBody bool, asJSON, asProto func() ([]byte, error)) {
	encode, ct := asProto, "application/x-protobuf"
	if jsonBody {
		encode, ct = asJSON, "application/json"
	}
	out, err := encode()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", ct)
	_, _ = w.Write(out)
}

type grpcReceiver struct {
	ptraceotlp.UnimplementedGRPCServer
	r *Receiver
}

func (g *grpcReceiver) Export(_ context.Context, er ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	g.r.add(er)
	return ptraceotlp.NewExportResponse(), nil
}

// add keeps the spans of one export request.
func (r *Receiver) add(er ptraceotlp.ExportRequest) {
	raw, _ := er.MarshalJSON()
	spans := flatten(er.Traces())
	r.mu.Lock()
	defer r.mu.Unlock()
	r.raw = append(r.raw, raw)
	r.spans = append(r.spans, spans...)
	close(r.changed)
	r.changed = make(chan struct{})
}

// Spans returns the spans received so far, in the order they came.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Raw returns every export request received, each as OTLP JSON: all that was
// sent, for a test that scans it for what must never be there.
func (r *Receiver) Raw() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Join(r.raw, []byte("\n"))
}

// Wait returns the spans received once cond holds for them, checked on each
// export that comes; it fails t, naming what it waited for, when cond does
// not hold within d.
func (r *Receiver) Wait(t testing.TB, d time.Duration, what string, cond func([]Span) bool) []Span {
	t.Helper()
	return wait(r, t, d, &r.spans, cond, func(spans []Span) string {
		return fmt.Sprintf("waiting for %s; received %d spans: %v", what, len(spans), Names(spans))
	})
}

// wait returns a copy of what r received in *got once cond holds for it,
// checked on each export that comes; it fails t, with what says, when cond
// does not hold within d.
func wait[T any](r *Receiver, t testing.TB, d time.Duration, got *[]T, cond func([]T) bool, says func([]T) string) []T {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		items, changed := append([]T(nil), *got...), r.changed
		r.mu.Unlock()
		if cond(items) {
			return items
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out after %v %s", d, says(items))
			return nil
		}
	}
}

// Names returns the spans' names, in order.
func Names(spans []Span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}

// Find returns the first span named name, and whether there is one.
func Find(spans []Span, name string) (Span, bool) {
	for _, s := range spans {
		if s.Name == name {
			return s, true
		}
	}
	return Span{}, false
}

func flatten(td ptrace.Traces) []Span {
	var out []Span
	for _, rs := range td.ResourceSpans().All() {
		res := attrs(rs.Resource().Attributes())
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				s := Span{
					Service: res["service.name"], Resource: res,
					TraceID: traceID(sp.TraceID()), SpanID: spanID(sp.SpanID()), ParentSpanID: spanID(sp.ParentSpanID()),
					TraceState: sp.TraceState().AsRaw(),
					Name:       sp.Name(), Kind: sp.Kind().String(), Attrs: attrs(sp.Attributes()),
					StatusCode: sp.Status().Code().String(), StatusMessage: sp.Status().Message(),
					Start: sp.StartTimestamp().AsTime(), End: sp.EndTimestamp().AsTime(),
				}
				for _, ev := range sp.Events().All() {
					s.Events = append(s.Events, Event{Name: ev.Name(), Time: ev.Timestamp().AsTime(), Attrs: attrs(ev.Attributes())})
				}
				for _, l := range sp.Links().All() {
					s.Links = append(s.Links, Link{TraceID: traceID(l.TraceID()), SpanID: spanID(l.SpanID()), Attrs: attrs(l.Attributes())})
				}
				out = append(out, s)
			}
		}
	}
	return out
}

func attrs(m pcommon.Map) map[string]string {
	out := make(map[string]string, m.Len())
	for k, v := range m.All() {
		out[k] = v.AsString()
	}
	return out
}

func traceID(id pcommon.TraceID) string {
	if id.IsEmpty() {
		return ""
	}
	return hex.EncodeToString(id[:])
}

func spanID(id pcommon.SpanID) string {
	if id.IsEmpty() {
		return ""
	}
	return hex.EncodeToString(id[:])
}

// Point is one data point of a histogram received, flattened for assertions.
type Point struct {
	Service string // the resource's service.name
	Metric  string // the histogram's name
	Unit    string
	Attrs   map[string]string
	Count   uint64
	Sum     float64
}

func (r *Receiver) serveMetrics(w http.ResponseWriter, b []byte, jsonBody bool) {
	er := pmetricotlp.NewExportRequest()
	if !decode(w, er, b, jsonBody) {
		return
	}
	var points []Point
	for _, rm := range er.Metrics().ResourceMetrics().All() {
		res := attrs(rm.Resource().Attributes())
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				if m.Type() != pmetric.MetricTypeHistogram {
					continue
				}
				for _, dp := range m.Histogram().DataPoints().All() {
					points = append(points, Point{Service: res["service.name"], Metric: m.Name(), Unit: m.Unit(),
						Attrs: attrs(dp.Attributes()), Count: dp.Count(), Sum: dp.Sum()})
				}
			}
		}
	}
	r.mu.Lock()
	r.points = append(r.points, points...)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	resp := pmetricotlp.NewExportResponse()
	respond(w, jsonBody, resp.MarshalJSON, resp.MarshalProto)
}

// Points returns the histograms' data points received so far, in the order
// they came (a cumulative histogram exported again comes again).
func (r *Receiver) Points() []Point {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Point(nil), r.points...)
}

// WaitPoints returns the data points received once cond holds for them,
// checked on each export that comes; it fails t when cond does not hold
// within d.
func (r *Receiver) WaitPoints(t testing.TB, d time.Duration, what string, cond func([]Point) bool) []Point {
	t.Helper()
	return wait(r, t, d, &r.points, cond, func(points []Point) string {
		return fmt.Sprintf("waiting for %s; received %d data points", what, len(points))
	})
}

// LogRecord is one log record received, flattened for assertions: ids in
// hex, attribute values as strings.
type LogRecord struct {
	Service         string // the resource's service.name
	Scope           string // the instrumentation scope's name
	EventName       string
	Time, Observed  time.Time
	Severity        string // INFO, WARN, ...: the number's name
	Body            string
	TraceID, SpanID string
	Attrs           map[string]string
}

func (r *Receiver) serveLogs(w http.ResponseWriter, b []byte, jsonBody bool) {
	er := plogotlp.NewExportRequest()
	if !decode(w, er, b, jsonBody) {
		return
	}
	r.addLogs(er)
	resp := plogotlp.NewExportResponse()
	respond(w, jsonBody, resp.MarshalJSON, resp.MarshalProto)
}

type grpcLogReceiver struct {
	plogotlp.UnimplementedGRPCServer
	r *Receiver
}

func (g *grpcLogReceiver) Export(_ context.Context, er plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	g.r.addLogs(er)
	return plogotlp.NewExportResponse(), nil
}

// addLogs keeps the records of one export request (and the request, for Raw).
func (r *Receiver) addLogs(er plogotlp.ExportRequest) {
	raw, _ := er.MarshalJSON()
	recs := flattenLogs(er.Logs())
	r.mu.Lock()
	defer r.mu.Unlock()
	r.raw = append(r.raw, raw)
	r.logs = append(r.logs, recs...)
	close(r.changed)
	r.changed = make(chan struct{})
}

func flattenLogs(ld plog.Logs) []LogRecord {
	var out []LogRecord
	for _, rl := range ld.ResourceLogs().All() {
		res := attrs(rl.Resource().Attributes())
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				out = append(out, LogRecord{
					Service: res["service.name"], Scope: sl.Scope().Name(), EventName: lr.EventName(),
					Time: lr.Timestamp().AsTime(), Observed: lr.ObservedTimestamp().AsTime(),
					Severity: lr.SeverityNumber().String(), Body: lr.Body().AsString(),
					TraceID: traceID(lr.TraceID()), SpanID: spanID(lr.SpanID()), Attrs: attrs(lr.Attributes()),
				})
			}
		}
	}
	return out
}

// Logs returns the log records received so far, in the order they came.
func (r *Receiver) Logs() []LogRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]LogRecord(nil), r.logs...)
}

// WaitLogs returns the log records received once cond holds for them,
// checked on each export that comes; it fails t when cond does not hold
// within d.
func (r *Receiver) WaitLogs(t testing.TB, d time.Duration, what string, cond func([]LogRecord) bool) []LogRecord {
	t.Helper()
	return wait(r, t, d, &r.logs, cond, func(recs []LogRecord) string {
		return fmt.Sprintf("waiting for %s; received %d log records", what, len(recs))
	})
}
