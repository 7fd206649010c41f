package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
)

// The binary's OTLP/HTTP span exporter (http/protobuf). The official one
// (otlptracehttp) turns every span into the proto package's structs and
// marshals them: on the benchmark, an echo over HTTP with every
// request traced and exported, that was the largest part of what tracing
// cost a request (docs/testing.md, "Tracing"). This one encodes the spans
// straight into a reused buffer (encode.go) and posts it, with the official
// exporter's reading of the environment for what it covers: the endpoint,
// headers, timeout and compression, and the same retries. Setup uses it when
// the environment asks for nothing else; a TLS certificate or client key, an
// endpoint without a scheme, or no endpoint at all (the official default),
// get the official exporter.

// Environment variables of the OTLP exporters that httpExporter reads.
const (
	envHeaders           = "OTEL_EXPORTER_OTLP_HEADERS"
	envTracesHeaders     = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	envTimeout           = "OTEL_EXPORTER_OTLP_TIMEOUT"
	envTracesTimeout     = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"
	envCompression       = "OTEL_EXPORTER_OTLP_COMPRESSION"
	envTracesCompression = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"
)

// envOfficialOnly are the variables only the official exporter reads: any of
// them set makes Setup use it.
var envOfficialOnly = []string{
	"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_CLIENT_KEY", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
	"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
}

// httpConfig is what httpExporter sends with.
type httpConfig struct {
	url     string
	header  http.Header
	timeout time.Duration
	gzip    bool
}

// httpConfigFromEnv reads the exporter's configuration as the official
// exporter does (a signal's own variable over the general one); ok is false
// when the environment asks for something only the official exporter does.
func httpConfigFromEnv() (cfg httpConfig, ok bool) {
	for _, k := range envOfficialOnly {
		if os.Getenv(k) != "" {
			return cfg, false
		}
	}
	switch {
	case os.Getenv(EnvTracesEndpoint) != "":
		u, err := url.Parse(os.Getenv(EnvTracesEndpoint))
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return cfg, false
		}
		cfg.url = u.String() // as it is
	case os.Getenv(EnvEndpoint) != "":
		u, err := url.Parse(os.Getenv(EnvEndpoint))
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return cfg, false
		}
		u.Path = path.Join(u.Path, "/v1/traces")
		cfg.url = u.String()
	default:
		return cfg, false
	}
	cfg.header = http.Header{}
	for k, v := range parseHeaders(signal(envTracesHeaders, envHeaders)) {
		cfg.header.Set(k, v)
	}
	cfg.timeout = 10 * time.Second
	if s := signal(envTracesTimeout, envTimeout); s != "" {
		ms, err := strconv.Atoi(s)
		if err != nil || ms < 0 {
			return cfg, false
		}
		cfg.timeout = time.Duration(ms) * time.Millisecond
	}
	switch signal(envTracesCompression, envCompression) {
	case "", "none":
	case "gzip":
		cfg.gzip = true
	default:
		return cfg, false
	}
	return cfg, true
}

// parseHeaders reads an OTEL_EXPORTER_OTLP_*HEADERS value, "k=v,k2=v2"
// with each key and value URL-escaped, as the official exporters do.
func parseHeaders(s string) map[string]string {
	h := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, found := strings.Cut(kv, "=")
		if !found {
			continue
		}
		key, err1 := url.PathUnescape(strings.TrimSpace(k))
		val, err2 := url.PathUnescape(strings.TrimSpace(v))
		if err1 != nil || err2 != nil || key == "" {
			continue // as the official exporter, which logs it
		}
		h[key] = val
	}
	return h
}

// signal returns the first of the variables that is set, trimmed.
func signal(vars ...string) string {
	for _, v := range vars {
		if p := strings.TrimSpace(os.Getenv(v)); p != "" {
			return p
		}
	}
	return ""
}

// httpExporter exports spans over OTLP/HTTP in protobuf. Exports are made one
// at a time (the batch processor's), so its buffers are reused.
type httpExporter struct {
	cfg    httpConfig
	client *http.Client
	// stop ends the exports in flight (Shutdown).
	stopCtx context.Context
	stop    context.CancelFunc
	// retryFirst is the first backoff (retryFirstDefault; shorter in tests).
	retryFirst time.Duration

	mu      sync.Mutex // guards the fields below; held for an export
	enc     encoder
	zbuf    bytes.Buffer
	zw      *gzip.Writer
	stopped bool
}

var _ sdktrace.SpanExporter = (*httpExporter)(nil)

// The retries, as the official exporter's: a 429, 502, 503 or 504 answer, or
// a temporary network error, is tried again after a backoff from 5 s
// doubling to 30 s, randomized by half, or the answer's Retry-After when it is
// longer, for at most a minute, and never past the export's context.
const (
	retryFirstDefault = 5 * time.Second
	retryMax          = 30 * time.Second
	retryTotal        = time.Minute
)

// maxResponse bounds what is read of a collector's answer.
const maxResponse = 64 << 10

func newHTTPExporter(cfg httpConfig) *httpExporter {
	tr := http.DefaultTransport.(*http.Transport).Clone() // its proxy from the environment, as the official one
	// The collector's headers (OTEL_EXPORTER_OTLP_HEADERS: often an API key)
	// are for its endpoint only: a redirect is not followed, and its answer
	// fails the export.
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	e := &httpExporter{cfg: cfg, client: &http.Client{Transport: tr, Timeout: cfg.timeout, CheckRedirect: noRedirect}, retryFirst: retryFirstDefault}
	e.stopCtx, e.stop = context.WithCancel(context.Background())
	return e
}

// ExportSpans sends spans in one request.
func (e *httpExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.stopCtx, cancel)()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil
	}
	body := e.enc.encode(spans)
	if e.cfg.gzip {
		e.zbuf.Reset()
		if e.zw == nil {
			e.zw = gzip.NewWriter(&e.zbuf)
		} else {
			e.zw.Reset(&e.zbuf)
		}
		_, _ = e.zw.Write(body)
		_ = e.zw.Close()
		body = e.zbuf.Bytes()
	}
	l := backoff.Start(e.retryFirst, retryMax, retryTotal, 0)
	for {
		retryAfter, err := e.send(ctx, body)
		var rerr *retryable
		if !errors.As(err, &rerr) {
			return err
		}
		if !l.Wait(ctx, max(retryAfter, l.Next())) {
			if ctx.Err() != nil {
				return errors.Join(rerr.err, ctx.Err())
			}
			return rerr.err
		}
	}
}

// retryable is an error of an attempt that may be made again.
type retryable struct{ err error }

func (r *retryable) Error() string { return r.err.Error() }

// send makes one attempt; a *retryable error (with the answer's Retry-After,
// 0 for none) says it may be made again.
func (e *httpExporter) send(ctx context.Context, body []byte) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range e.cfg.header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "mcp-resume OTLP exporter")
	if e.cfg.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) && uerr.Temporary() && ctx.Err() == nil {
			return 0, &retryable{err}
		}
		return 0, err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode <= 299:
		return 0, partialSuccess(answer)
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusBadGateway,
		resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		var after time.Duration
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			after = time.Duration(s) * time.Second
		}
		return after, &retryable{fmt.Errorf("failed to send to %s: %s (body: %s)", e.cfg.url, resp.Status, bodyText(answer))}
	}
	return 0, fmt.Errorf("failed to send to %s: %s (body: %s)", e.cfg.url, resp.Status, bodyText(answer))
}

func bodyText(b []byte) string {
	if s := strings.TrimSpace(string(b)); s != "" {
		return s
	}
	return "(empty)"
}

// partialSuccess reads an ExportTraceServiceResponse: an error when the
// collector says it rejected spans, or says why.
func partialSuccess(b []byte) error {
	ps := field(b, 1) // partial_success
	if ps == nil {
		return nil
	}
	var rejected int64
	var msg string
	for len(ps) > 0 {
		num, typ, n := protowire.ConsumeTag(ps)
		if n < 0 {
			return nil
		}
		ps = ps[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(ps)
			if m < 0 {
				return nil
			}
			rejected, ps = int64(v), ps[m:]
		case num == 2 && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(ps)
			if m < 0 {
				return nil
			}
			msg, ps = string(v), ps[m:]
		default:
			m := protowire.ConsumeFieldValue(num, typ, ps)
			if m < 0 {
				return nil
			}
			ps = ps[m:]
		}
	}
	if rejected == 0 && msg == "" {
		return nil
	}
	return fmt.Errorf("OTLP partial success: %s (%d spans rejected)", msg, rejected)
}

// field returns the bytes of message b's length-delimited field num; nil when
// it has none (or b does not parse).
func field(b []byte, num protowire.Number) []byte {
	for len(b) > 0 {
		n, typ, m := protowire.ConsumeTag(b)
		if m < 0 {
			return nil
		}
		b = b[m:]
		if n == num && typ == protowire.BytesType {
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return nil
			}
			return v
		}
		k := protowire.ConsumeFieldValue(n, typ, b)
		if k < 0 {
			return nil
		}
		b = b[k:]
	}
	return nil
}

// Shutdown stops the exporter: an export in flight ends (its retries too),
// and the exports that come after it do nothing.
func (e *httpExporter) Shutdown(ctx context.Context) error {
	e.stop()
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
	e.client.CloseIdleConnections()
	return ctx.Err()
}
