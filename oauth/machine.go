package oauth

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// machineLocked gets a token by the client credentials grant: a machine's
// login (ClientOptions.Machine).
func (s *Session) machineLocked(ctx context.Context, d *discovered, ch *Challenge, scopes []string) error {
	if s.opts.ClientID == "" {
		return errors.New("oauth: a machine client needs its client id")
	}
	// Its secret (or assertion) goes to the token endpoint of the issuer it
	// is registered at, read from that issuer's own metadata, and nowhere
	// else: never a guessed <origin>/token, never an issuer a server names.
	if d.guessed || d.issuer != s.opts.ClientIssuer || d.meta.Issuer != s.opts.ClientIssuer {
		return fmt.Errorf("oauth: the machine client %s is registered at %s, not at %s: refused", quote(s.opts.ClientID), s.opts.ClientIssuer, d.issuer)
	}
	if scopes == nil && len(s.opts.Scopes) > 0 {
		scopes = slices.Clone(s.opts.Scopes)
	}
	if scopes == nil {
		scopes = ch.Scopes()
		if len(scopes) == 0 {
			scopes = slices.Clone(d.prmScopes)
		}
	}
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {d.resource}}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	reg := &Registration{Issuer: d.issuer, ClientID: s.opts.ClientID, ClientSecret: s.opts.ClientSecret, AuthMethod: s.opts.AuthMethod}
	if s.opts.PrivateKey != nil {
		assertion, err := s.clientAssertion(d.meta.Issuer)
		if err != nil {
			return err
		}
		reg.AuthMethod = "private_key_jwt"
		form.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		form.Set("client_assertion", assertion)
	} else if reg.AuthMethod == "" {
		reg.AuthMethod = "client_secret_basic"
		if m := d.meta.TokenAuthMethods; len(m) > 0 && !slices.Contains(m, "client_secret_basic") && slices.Contains(m, "client_secret_post") {
			reg.AuthMethod = "client_secret_post"
		}
	}
	tr, err := s.tokenRequest(ctx, d.meta, reg, form)
	if err != nil {
		return err
	}
	if err := s.keep(tr.grant(d.meta.Issuer, d.resource, reg.ClientID, scopes)); err != nil {
		return err
	}
	s.fresh = s.grant.AccessToken
	s.log.Info().Str("issuer", d.issuer).Str("resource", d.resource).Msg("oauth: token of the client credentials grant")
	return nil
}

// clientAssertion is the JWT that authenticates this client at the token
// endpoint of audience (RFC 7523 §3), signed with ClientOptions.PrivateKey.
func (s *Session) clientAssertion(audience string) (string, error) {
	alg := jose.SignatureAlgorithm(s.opts.SigningAlg)
	if alg == "" {
		alg = jose.ES256
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: s.opts.PrivateKey}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("oauth: the client's private key: %w", err)
	}
	now := time.Now()
	return jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: s.opts.ClientID, Subject: s.opts.ClientID, Audience: jwt.Audience{audience},
		ID: rand.Text(), IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(5 * time.Minute)),
	}).Serialize()
}
