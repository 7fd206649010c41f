package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/dial"
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

// keyNote is the part of the client commands' help about the API key.
const keyNote = "A server started with --api-keys wants an API key: set " + envClientKey + " to yours\n(an environment variable, not a flag: a command line shows in ps to every user).\n\n"

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
func checkExposure(f *serveFlags, authOn bool) error {
	if authOn || f.insecureNoAuth || f.stdio {
		return nil
	}
	for _, a := range []struct{ flag, addr string }{{"--http", f.httpAddr}, {"--ws", f.wsAddr}} {
		if a.addr != "" && !isLoopback(a.addr) {
			return fmt.Errorf("%s %s is not a loopback address and no authentication is configured: give --api-keys FILE (or %s) or --oauth-issuer URL, or --insecure-no-auth to serve it without authentication",
				a.flag, a.addr, envServerKeys)
		}
	}
	return nil
}

// clientKey returns the header that carries the API key the client commands
// (call, status, task, tools) present, from MCP_RESUME_API_KEY; nil without
// one.
func clientKey() http.Header {
	key := strings.TrimSpace(os.Getenv(envClientKey))
	if key == "" {
		return nil
	}
	return http.Header{"Authorization": {"Bearer " + key}}
}

// reloadOnHUP re-reads the API keys (--api-keys FILE and MCP_RESUME_API_KEYS) on
// each SIGHUP until ctx ends, and puts them in keys. Keys that do not load (a bad
// file) leave the old ones in place. The returned function stops it and waits.
func reloadOnHUP(ctx context.Context, file string, keys *transport.KeySet, log zerolog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-hup:
				next, err := loadKeys(file)
				switch {
				case err != nil:
					log.Error().Err(err).Msg("reloading API keys failed; the old keys stay")
				case next == nil:
					log.Error().Msg("reloading API keys: none left; the old keys stay")
				default:
					keys.Replace(next)
					log.Info().Int("keys", keys.Len()).Msg("API keys reloaded")
				}
			case <-ctx.Done():
				return
			}
		}
	})
	return func() {
		signal.Stop(hup)
		cancel()
		wg.Wait()
	}
}

// errInterrupted is a command's error when an interrupt (Ctrl-C, SIGTERM)
// ended it before it was connected: while it logged in, or connected.
var errInterrupted = errors.New("interrupted before the server was reached (a login in the browser was left unfinished: mcp-resume login URL logs in alone)")

// connect is client.Connect for the commands: a login the server wants and
// none is stored for comes first (loginFirst); an error of the first
// connection says what to do about it (see explain); an interrupt ends both at
// once.
func (t *target) connect(ctx context.Context, d client.Dialer, opts *client.Options) (*client.Client, error) {
	if err := t.loginFirst(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, errInterrupted
		}
		return nil, err
	}
	c, err := client.Connect(ctx, d, opts)
	if err != nil && ctx.Err() != nil {
		return nil, errInterrupted
	}
	if err == nil || t.ep.Kind() == dial.Stdio {
		return c, err
	}
	creds := "set " + envClientKey + " to your API key (an environment variable: a flag would show in ps)"
	if os.Getenv(envClientKey) != "" {
		creds = "the server refused the API key in " + envClientKey
	}
	return nil, explain(err, t.ep.URL(), creds)
}

// loginFirst logs in to the target's server when it wants a login and none
// is stored, before the client connects: on ctx, which an interrupt ends
// (the login with it), within loginWait, not inside a connection attempt
// (whose deadline is no person's). A server that cannot be reached is not
// an error here: the connection says so.
func (t *target) loginFirst(ctx context.Context) error {
	if t.session == nil {
		return nil
	}
	if tok, err := t.session.Token(ctx); err != nil || tok != "" {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, loginWait)
	defer cancel()
	_, err := probe(ctx, t.ep.URL(), t.session)
	return err
}
