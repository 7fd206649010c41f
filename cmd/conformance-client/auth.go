package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/mcp-resume/mcp-resume/oauth"
)

// cimdURL is the Client ID Metadata Document the suite's authorization
// servers take as this client's id where they support them.
const cimdURL = "https://conformance-test.local/client-metadata.json"

// redirectURI is where the suite's authorization servers send the login
// back: nothing listens there, the redirect is read where it leaves
// (oauth.Headless).
const redirectURI = "http://127.0.0.1:3000/callback"

// authContext is what the suite's auth scenarios give the client.
type authContext struct {
	ClientID      string `json:"client_id"`
	ClientSecret  string `json:"client_secret"`
	PrivateKeyPEM string `json:"private_key_pem"`
	SigningAlg    string `json:"signing_algorithm"`
}

// authorize is the OAuth client of an auth/* scenario, as connect's is: a
// person's (the authorization code flow, the redirect read headless, the
// suite's authorization server approving at once), with the pre-registered
// client the context names, else the CIMD, else a registration; or a
// machine's in the client credentials scenarios.
func authorize(ctx context.Context, sc *scenario, base http.RoundTripper) (http.RoundTripper, error) {
	var ac authContext
	if sc.Context != nil {
		if err := json.Unmarshal(sc.Context, &ac); err != nil {
			return nil, fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	opts := &oauth.ClientOptions{
		ClientID: ac.ClientID, ClientSecret: ac.ClientSecret,
		ClientMetadataURL: cimdURL, ClientName: "mcp-resume-conformance-client",
		Authorize: oauth.Headless(nil, redirectURI),
	}
	if ac.ClientSecret != "" || ac.PrivateKeyPEM != "" {
		// A pre-registered client with a secret is bound to the issuer it
		// is registered at, which an operator names (connect's
		// --client-issuer). The suite names its authorization server only in
		// its server's protected resource metadata: the harness reads it
		// there, as an operator would read it off the suite's set-up.
		is, err := suiteIssuer(ctx, sc.URL)
		if err != nil {
			return nil, err
		}
		opts.ClientIssuer = is
	}
	switch sc.Name {
	case "auth/client-credentials-basic", "auth/client-credentials-jwt":
		opts.Machine, opts.Authorize = true, nil
		if ac.PrivateKeyPEM != "" {
			key, err := parsePrivateKey(ac.PrivateKeyPEM)
			if err != nil {
				return nil, err
			}
			opts.PrivateKey, opts.SigningAlg = key, ac.SigningAlg
		}
	case "auth/cross-app-access-complete-flow", "auth/enterprise-managed-authorization", "auth/wif-jwt-bearer", "auth/dpop", "auth/dpop-nonce":
		return nil, errors.New("this client does not do " + sc.Name + " (see .ci/conformance-client-*-expected.yaml)")
	}
	return &oauth.Transport{Session: oauth.NewSession(sc.URL, opts), Base: base}, nil
}

// parsePrivateKey reads a PKCS#8 private key in PEM.
func parsePrivateKey(p string) (any, error) {
	b, _ := pem.Decode([]byte(p))
	if b == nil {
		return nil, errors.New("private_key_pem: no PEM block")
	}
	key, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("private_key_pem: %w", err)
	}
	return key, nil
}

// suiteIssuer is the first authorization server the protected resource
// metadata of the suite's server at serverURL names (its 401's
// resource_metadata, else the path-specific well-known URL, else the root).
func suiteIssuer(ctx context.Context, serverURL string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", err
	}
	base := u.Scheme + "://" + u.Host
	var candidates []string
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"ping"}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		if rm := oauth.Bearer(resp.Header).Param("resource_metadata"); rm != "" {
			candidates = append(candidates, rm)
		}
	}
	candidates = append(candidates, base+"/.well-known/oauth-protected-resource"+strings.TrimSuffix(u.EscapedPath(), "/"), base+"/.well-known/oauth-protected-resource")
	for _, c := range candidates {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c, nil)
		if err != nil {
			continue
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		var doc struct {
			AuthorizationServers []string `json:"authorization_servers"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&doc)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && err == nil && len(doc.AuthorizationServers) > 0 {
			return doc.AuthorizationServers[0], nil
		}
	}
	return "", errors.New("the suite's server names no authorization server in its protected resource metadata")
}
