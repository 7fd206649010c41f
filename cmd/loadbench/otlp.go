package main

import (
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/mcp-resume/mcp-resume/testkit/otlptest"
)

// otlpSink is an OTLP/HTTP endpoint for the targets that trace ({otlp} in
// their ARGS): it takes every export and answers it as a collector does, so
// that a target exports as it would to a real one. It keeps the traces'
// exports as they came, and decodes them only when asked what it received
// (String, after the rounds): a collector runs elsewhere, and its work is not
// the measured server's, nor this client's.
type otlpSink struct {
	url string
	srv *http.Server

	mu     sync.Mutex
	traces [][]byte // the traces' export requests, undecoded
	bytes  int64    // of every export, metrics' included
}

// startOTLPSink starts a sink on a free loopback port.
func startOTLPSink() (*otlpSink, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &otlpSink{url: "http://" + addr}
	s.srv = &http.Server{Handler: s}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := otlptest.ReadBody(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.bytes += int64(len(b))
	if r.URL.Path == "/v1/traces" {
		s.traces = append(s.traces, b)
	}
	s.mu.Unlock()
	// An empty Export*ServiceResponse: success, nothing rejected.
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

// String says what the sink received: the spans of each service.
func (s *otlpSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := map[string]int{}
	bad := 0
	for _, b := range s.traces {
		er := ptraceotlp.NewExportRequest()
		if err := er.UnmarshalProto(b); err != nil {
			bad++
			continue
		}
		for _, rs := range er.Traces().ResourceSpans().All() {
			svc, _ := rs.Resource().Attributes().Get("service.name")
			for _, ss := range rs.ScopeSpans().All() {
				n[svc.AsString()] += ss.Spans().Len()
			}
		}
	}
	var parts []string
	for svc, k := range n {
		parts = append(parts, fmt.Sprintf("%s %d", svc, k))
	}
	sort.Strings(parts)
	out := fmt.Sprintf("otlp sink: %d bytes; spans by service: %s", s.bytes, strings.Join(parts, ", "))
	if bad > 0 {
		out += fmt.Sprintf("; %d exports not decoded", bad)
	}
	return out
}

func (s *otlpSink) close() { _ = s.srv.Close() }
