package oauth_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/oauth"
	"github.com/mcp-resume/mcp-resume/testkit/oauthtest"
)

// FuzzCheck: whatever an Authorization header holds, Check answers with a
// token or a refusal that says why (401, 403, 429 or 503, with a reason),
// and never panics.
func FuzzCheck(f *testing.F) {
	op := oauthtest.Start(f)
	rs, err := oauth.New(&oauth.Options{Resource: resource, Issuers: []string{op.Issuer}, Scopes: []string{"mcp"}})
	if err != nil {
		f.Fatal(err)
	}
	good := op.Token(f, "alice", resource, "mcp")
	parts := strings.Split(good, ".")
	for _, s := range []string{
		"", "Bearer", "Bearer ", "Basic abc", "Bearer " + good, "bearer " + good, "Bearer  " + good + " ",
		"Bearer " + parts[0] + "." + parts[1] + ".", "Bearer " + parts[0] + ".." + parts[2], "Bearer ...",
		"Bearer " + base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"x"}`)) + "." + parts[1] + "." + parts[2],
		"Bearer " + base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256"}`)) + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"`+op.Issuer+`","exp":"soon"}`)) + ".sig",
		"Bearer opaque-token", "Bearer " + strings.Repeat("x", 9000),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, authorization string) {
		tok, ref := rs.Check(context.Background(), authorization, "192.0.2.1")
		switch {
		case tok == nil && ref == nil, tok != nil && ref != nil:
			t.Fatalf("%q: token %v and refusal %v", authorization, tok, ref)
		case ref != nil:
			if ref.Err == nil || ref.Err.Reason == "" || (ref.Status != 401 && ref.Status != 403 && ref.Status != 429 && ref.Status != 503) {
				t.Fatalf("%q: refusal %d %+v", authorization, ref.Status, ref.Err)
			}
		case tok.Subject == "":
			t.Fatalf("%q: a token without a subject", authorization)
		}
	})
}
