package oauth_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/oauth"
)

// An introspection that names no subject (neither sub nor username) cannot
// say whose the token is: such a token is refused (no_subject), or, when the
// operator says so (ClientPrincipal), it is its client's; without a client_id
// either, it is refused then too. Two users' tokens are never one principal
// by default.
func TestIntrospectionWithoutSubject(t *testing.T) {
	as := newIntrospectionAS(t, func(token string) map[string]any {
		switch token {
		case "alice", "bob": // one client's users; the server names neither
			return map[string]any{"active": true, "client_id": "desktop-app", "aud": resource}
		case "nobody":
			return map[string]any{"active": true, "aud": resource}
		case "carol":
			return map[string]any{"active": true, "username": "carol", "client_id": "desktop-app", "aud": resource}
		}
		return nil
	})
	rs := newIntrospecting(t, as, oauth.Options{})
	for _, tok := range []string{"alice", "bob", "nobody"} {
		id, status, body := authenticate(rs, "192.0.2.1:1000", tok, "")
		if status != http.StatusUnauthorized || !strings.Contains(body, string(oauth.ReasonNoSubject)) {
			t.Errorf("%s's token without a subject: %d %q %s, want 401 no_subject", tok, status, id.Principal, body)
		}
	}
	if id, status, body := authenticate(rs, "192.0.2.1:1000", "carol", ""); status != http.StatusOK || !strings.HasSuffix(id.Principal, "#carol") {
		t.Errorf("a token with a username: %d %q %s", status, id.Principal, body)
	}

	byClient := newIntrospecting(t, as, oauth.Options{ClientPrincipal: true})
	if id, status, body := authenticate(byClient, "192.0.2.1:1000", "alice", ""); status != http.StatusOK || !strings.HasSuffix(id.Principal, "#client:desktop-app") {
		t.Errorf("with ClientPrincipal, a token naming its client: %d %q %s", status, id.Principal, body)
	}
	if _, status, body := authenticate(byClient, "192.0.2.1:1000", "nobody", ""); status != http.StatusUnauthorized || !strings.Contains(body, string(oauth.ReasonNoSubject)) {
		t.Errorf("with ClientPrincipal, a token naming no client either: %d %s, want 401 no_subject", status, body)
	}
}
