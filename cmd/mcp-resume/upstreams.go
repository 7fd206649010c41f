package main

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/gateway"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/transport/dial"
	"github.com/mcp-resume/mcp-resume/transport/stdio"
)

// startUpstreams starts the gateway of the several upstreams the policy file
// names (pol.upstreams), each in the background: one that is not there holds
// back neither the start nor the others. cur is the policies in effect (a
// reload changes them): an upstream's tool is restartable when its policy
// there says so.
func startUpstreams(pol *policies, cur *atomic.Pointer[policies], stderr io.Writer, log zerolog.Logger,
	tp trace.TracerProvider, onOp func(client.Operation)) (*gateway.Aggregate, error) {
	ups := make([]gateway.Upstream, 0, len(pol.upstreams))
	for _, u := range pol.upstreams {
		name := u.Name
		o := gateway.Options{
			Command: u.Command, Env: u.Env, Dir: u.Dir, URL: u.URL,
			Stderr: stderr, Version: version, Logger: &log, TracerProvider: tp, OnOperation: onOp,
			Restartable: func(tool string) bool { return cur.Load().ups[name].of(tool).Restartable },
		}
		if _, err := stdio.Environ(u.Env); err != nil {
			return nil, fmt.Errorf("upstream %s: env: %w", name, err)
		}
		if u.URL != "" {
			if _, err := checkURL("upstream "+name+": url", u.URL, dial.HTTP, dial.WebSocket); err != nil {
				return nil, err
			}
		}
		var headers headerList
		for _, h := range u.Headers {
			if err := headers.Set(h); err != nil {
				return nil, fmt.Errorf("upstream %s: headers: %w", name, err)
			}
		}
		var err error
		if o.Header, err = withTokenFrom(headers.h, u.TokenEnv, "upstream "+name+": tokenEnv"); err != nil {
			return nil, err
		}
		if a := u.OAuth; a != nil {
			var secret string
			if a.ClientSecretEnv != "" {
				if secret = os.Getenv(a.ClientSecretEnv); secret == "" {
					return nil, fmt.Errorf("upstream %s: oauth: %s is not set or empty", name, a.ClientSecretEnv)
				}
			}
			l := log.With().Str("upstream", name).Logger()
			o.Wrap = machineClient(u.URL, a.ClientID, secret, a.Issuer, a.Scopes, &l)
		}
		ups = append(ups, gateway.Upstream{Name: name, Options: o})
	}
	return gateway.Start(ups, &gateway.AggregateOptions{Name: "mcp-resume-gateway", Version: version,
		Conflict: gateway.Conflict(pol.conflict), Logger: &log})
}
