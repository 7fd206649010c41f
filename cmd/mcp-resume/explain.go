package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"

	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/dial"
)

// checkURL returns the endpoint raw names (dial.Parse), refusing what cannot
// be one of flag before anything is dialled: a URL without a scheme or host,
// or with a scheme of another transport than kinds, the ones flag takes.
func checkURL(flag, raw string, kinds ...dial.Kind) (dial.Endpoint, error) {
	var schemes []string
	for _, k := range kinds {
		schemes = append(schemes, k.Schemes()...)
	}
	want := strings.Join(schemes, "://, ") + "://"
	ep, err := dial.Parse(raw)
	if errors.Is(err, dial.ErrNotURL) {
		guess := raw
		if !strings.Contains(guess, "://") {
			guess = schemes[0] + "://" + strings.TrimPrefix(guess, "//")
			if g, err := url.Parse(guess); err == nil && (g.Path == "" || g.Path == "/") && schemes[0] == "http" {
				guess = strings.TrimSuffix(guess, "/") + "/mcp"
			}
		}
		return dial.Endpoint{}, fmt.Errorf("%s %q: want a URL with its scheme (%s), such as %s", flag, raw, want, guess)
	}
	scheme := ep.Scheme()
	if se := (*dial.SchemeError)(nil); errors.As(err, &se) {
		scheme = se.Scheme
	} else if err == nil && slices.Contains(kinds, ep.Kind()) {
		return ep, nil
	}
	return dial.Endpoint{}, fmt.Errorf("%s %q: the scheme is %s:// here, want %s", flag, raw, scheme, want)
}

// explain adds to err, the failure of the first connection to the server at
// target, what to do about it. creds says where this command takes the
// server's credentials, for a server that wants some.
func explain(err error, target, creds string) error {
	if hint := hintFor(err, target, creds); hint != "" {
		return fmt.Errorf("%w\nhint: %s", err, hint)
	}
	return err
}

func hintFor(err error, target, creds string) string {
	var (
		refused *transport.RefusedError
		dns     *net.DNSError
		cert    *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
	)
	u, _ := url.Parse(target)
	hostPort := target
	if u != nil && u.Host != "" {
		hostPort = u.Host
	}
	switch {
	case errors.As(err, &refused):
		switch refused.Code {
		case http.StatusUnauthorized:
			return "the server wants credentials: " + creds
		case http.StatusForbidden:
			return "the server refused these credentials, or this client's Origin or Host (see its --allowed-origins and --allowed-hosts)"
		case http.StatusNotFound, http.StatusMethodNotAllowed:
			if u != nil && !strings.HasSuffix(u.Path, "/mcp") && !strings.HasSuffix(u.Path, "/ws") {
				return fmt.Sprintf("nothing serves MCP at %s; mcp-resume serve's endpoint is /mcp (%s://%s/mcp), its WebSocket /ws", target, u.Scheme, u.Host)
			}
			return fmt.Sprintf("nothing serves MCP at %s: check the path", target)
		case http.StatusBadRequest:
			if strings.Contains(string(refused.Body), "HTTPS") {
				return "the server speaks TLS: use https:// (or wss://)"
			}
		}
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("nothing listens at %s: is the server running (mcp-resume serve)? Check the host and port", hostPort)
	case errors.As(err, &dns):
		return fmt.Sprintf("the host %q is not known here (DNS): check the URL", dns.Name)
	case errors.Is(err, http.ErrSchemeMismatch):
		return "the server speaks plain HTTP: use http:// (or ws://)"
	case errors.As(err, &cert), errors.As(err, &unknown), errors.As(err, &host):
		return "the server's TLS certificate is not trusted here (see the error): a self-signed or internal CA needs SSL_CERT_FILE or SSL_CERT_DIR pointing at it"
	case errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return fmt.Sprintf("%s cannot be reached from here (network, firewall or VPN)", hostPort)
	}
	return ""
}
