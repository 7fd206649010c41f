package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/mcp-resume/mcp-resume/transport"
)

// Environment variables of authentication.
const (
	// envServerKeys holds the server's API keys, as --api-keys' file does
	// (principal:key, comma- or newline-separated).
	envServerKeys = "MCP_RESUME_API_KEYS"
	// envClientKey is the API key `call` and `status` present (never a flag: a
	// command line is visible to every user of the machine).
	envClientKey = "MCP_RESUME_API_KEY"
)

// loadKeys returns the API keys of --api-keys FILE and of MCP_RESUME_API_KEYS
// together, or nil when neither gives any (no authentication).
func loadKeys(file string) (*transport.KeySet, error) {
	var text strings.Builder
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--api-keys: %w", err)
		}
		text.Write(b)
		text.WriteByte('\n')
	}
	text.WriteString(os.Getenv(envServerKeys))
	if file == "" && strings.TrimSpace(text.String()) == "" {
		return nil, nil
	}
	ks, err := transport.ParseKeys(text.String())
	if err != nil {
		return nil, fmt.Errorf("--api-keys / %s: %w", envServerKeys, err)
	}
	return ks, nil
}

// isLoopback reports whether a listen address can only be reached from this
// machine: a loopback IP or localhost. An empty host (all interfaces) is not.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// checkExposure refuses a listener other machines can reach when there is no
// authentication, unless the operator said --insecure-no-auth.
func checkExposure(f *serveFlags, keys *transport.KeySet) error {
	if keys != nil || f.insecureNoAuth || f.stdio {
		return nil
	}
	for _, a := range []struct{ flag, addr string }{{"--http", f.httpAddr}, {"--ws", f.wsAddr}} {
		if a.addr != "" && !isLoopback(a.addr) {
			return fmt.Errorf("%s %s is not a loopback address and no API keys are configured: give --api-keys FILE (or %s), or --insecure-no-auth to serve it without authentication",
				a.flag, a.addr, envServerKeys)
		}
	}
	return nil
}

// bearer adds an API key to every request it carries.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

// clientKey returns the API key `call` and `status` present, and the header and
// HTTP client that carry it (nil and the default without one).
func clientKey() (http.Header, *http.Client) {
	key := strings.TrimSpace(os.Getenv(envClientKey))
	if key == "" {
		return nil, nil
	}
	return http.Header{"Authorization": {"Bearer " + key}}, &http.Client{Transport: bearer{key, http.DefaultTransport}}
}
