// Package oauth is the OAuth 2.1 side of mcp-resume as the MCP authorization
// specification (revisions 2025-11-25 and 2026-07-28) describes it.
//
// ResourceServer makes a server (serve, gateway) a protected resource: it
// publishes its protected resource metadata (RFC 9728), challenges a request
// without a good token with WWW-Authenticate (RFC 6750), accepts only access
// tokens its authorization servers issued for it (RFC 8707 audience), checked
// as JWTs against the issuer's keys (go-jose; the keys fetched from the
// issuer's JWKS, again when a token names a key not known yet, at most once a
// while) or through RFC 7662 introspection, and names the principal of a
// request by the token's issuer and subject. It fails closed: an issuer whose
// keys or introspection cannot be reached refuses what it cannot check (keys
// fetched before keep working).
package oauth
