package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"

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
func authorize(_ context.Context, sc *scenario, base http.RoundTripper) (http.RoundTripper, error) {
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
