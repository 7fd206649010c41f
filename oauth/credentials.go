package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// ClientCredentials are a confidential client's own credentials at an
// authorization server: Authorization gives a bearer token of the client
// credentials grant (RFC 6749 §4.4) for Resource (RFC 8707), fetched when
// first needed and again before it expires. A gateway calls its upstream
// with these, never with its clients' tokens.
type ClientCredentials struct {
	Issuer                 string // found by RFC 8414 / OpenID Connect discovery
	ClientID, ClientSecret string
	Resource               string // the upstream's canonical URI
	Scopes                 []string
	Client                 *http.Client // default: one with a 10 s timeout

	mu      sync.Mutex // guards src and tried
	src     oauth2.TokenSource
	tried   time.Time // the last discovery that failed
	lastErr error
}

// Authorization returns the Authorization header value to send
// ("Bearer <token>").
func (c *ClientCredentials) Authorization(ctx context.Context) (string, error) {
	src, err := c.source(ctx)
	if err != nil {
		return "", err
	}
	tok, err := src.Token()
	if err != nil {
		return "", fmt.Errorf("oauth: a token from %s: %w", c.Issuer, err)
	}
	return "Bearer " + tok.AccessToken, nil
}

// source discovers the token endpoint once (again at most every
// refetchEvery after a failure) and returns the token source.
func (c *ClientCredentials) source(ctx context.Context) (oauth2.TokenSource, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src != nil {
		return c.src, nil
	}
	if time.Since(c.tried) < refetchEvery && c.lastErr != nil {
		return nil, c.lastErr
	}
	client := c.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	meta, err := discover(ctx, client, c.Issuer)
	if err == nil && meta.TokenEndpoint == "" {
		err = errors.New("its metadata names no token_endpoint")
	}
	if err != nil {
		c.tried, c.lastErr = time.Now(), fmt.Errorf("oauth: the authorization server %s: %w", c.Issuer, err)
		return nil, c.lastErr
	}
	cfg := &clientcredentials.Config{
		ClientID: c.ClientID, ClientSecret: c.ClientSecret, TokenURL: meta.TokenEndpoint, Scopes: c.Scopes,
		EndpointParams: url.Values{"resource": {c.Resource}},
	}
	// The context is kept for every later fetch: it carries only the client.
	c.src = cfg.TokenSource(context.WithValue(context.Background(), oauth2.HTTPClient, client))
	return c.src, nil
}
