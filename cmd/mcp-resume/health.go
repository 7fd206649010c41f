package main

import (
	"fmt"
	"net/http"
	"sync/atomic"
)

// probes answers the liveness and readiness checks of the --http listener:
// /healthz is 200 "ok" while the process serves (a gateway of several adds a
// line per upstream, "upstream NAME up" or "down": an upstream that is down
// makes its own tools fail, not the process, which a liveness probe would
// restart); /readyz is 200 "ready" until shutdown begins, then 503, so that a
// load balancer stops sending new work while open streams close. Neither needs
// an API key or an allowed Host (an orchestrator's probe uses the pod's
// address).
type probes struct {
	stopping atomic.Bool
	eps      []endpoint // the endpoints; an upstream's says whether it is up
}

// shutdown makes /readyz answer 503 from now on.
func (p *probes) shutdown() { p.stopping.Store(true) }

func (p *probes) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", p.healthz)
	mux.HandleFunc("GET /readyz", p.readyz)
}

func (p *probes) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte("ok\n"))
	for _, e := range p.eps {
		if e.gw == nil {
			continue
		}
		state := "down"
		if e.gw.Up() {
			state = "up"
		}
		_, _ = fmt.Fprintf(w, "upstream %s %s\n", e.upstream, state)
	}
}

func (p *probes) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if p.stopping.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("shutting down\n"))
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}
