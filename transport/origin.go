package transport

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// LoopbackHosts are the host names a server accepts in Host and Origin by default.
var LoopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// AllowedRequest checks an HTTP request (a Streamable HTTP message, a WebSocket
// handshake) against DNS rebinding. Its Host must be one of hosts (host names or
// IPs, on any port; "*" for any). Its Origin, when it has one (a browser's
// request), must be one of origins ("*" for any), or, with no origins given, an
// http or https origin on a loopback host.
func AllowedRequest(r *http.Request, hosts, origins []string) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if !matchHost(hosts, strings.Trim(host, "[]")) {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if len(origins) > 0 {
		return slices.Contains(origins, "*") || slices.Contains(origins, origin)
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return matchHost(LoopbackHosts, u.Hostname())
}

func matchHost(allowed []string, host string) bool {
	for _, a := range allowed {
		if a == "*" || strings.EqualFold(strings.Trim(a, "[]"), host) {
			return true
		}
	}
	return false
}
