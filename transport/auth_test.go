package transport_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/transport"
)

func TestParseKeys(t *testing.T) {
	ks, err := transport.ParseKeys("# operators\nalice:k-alice\n\n  bob : k-bob , carol:k-carol\n")
	if err != nil {
		t.Fatal(err)
	}
	if ks.Len() != 3 {
		t.Fatalf("Len = %d; want 3", ks.Len())
	}
	for key, want := range map[string]string{"k-alice": "alice", "k-bob": "bob", "k-carol": "carol"} {
		if p, ok := ks.Lookup(key); !ok || p != want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", key, p, ok, want)
		}
	}
	for _, key := range []string{"", "k-ali", "k-alice2", "alice", "K-ALICE"} {
		if p, ok := ks.Lookup(key); ok {
			t.Errorf("Lookup(%q) = %q; want unknown", key, p)
		}
	}
	for _, bad := range []string{"", "# only a comment", "nokey", ":k", "p:", "a:same\nb:same"} {
		_, err := transport.ParseKeys(bad)
		if err == nil {
			t.Errorf("ParseKeys(%q): no error", bad)
		} else if strings.Contains(err.Error(), "same") {
			t.Errorf("ParseKeys(%q): the error quotes the key: %v", bad, err)
		}
	}
}

func TestKeySetPrincipal(t *testing.T) {
	ks, err := transport.ParseKeys("alice:secret")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		auth, want string
		ok         bool
	}{
		{"Bearer secret", "alice", true},
		{"bearer secret", "alice", true},
		{"Bearer  secret ", "alice", true},
		{"", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Basic secret", "", false},
		{"Bearer wrong", "", false},
	} {
		r := httptest.NewRequest("POST", "/mcp", nil)
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		if p, ok := ks.Principal(r); p != tc.want || ok != tc.ok {
			t.Errorf("Authorization %q: %q, %v; want %q, %v", tc.auth, p, ok, tc.want, tc.ok)
		}
	}
}

// Replace swaps the keys: the new ones work, the old ones no longer do.
func TestKeySetReplace(t *testing.T) {
	ks, err := transport.ParseKeys("alice:old")
	if err != nil {
		t.Fatal(err)
	}
	next, err := transport.ParseKeys("alice:new,bob:k-bob")
	if err != nil {
		t.Fatal(err)
	}
	ks.Replace(next)
	if _, ok := ks.Lookup("old"); ok {
		t.Error("the replaced key still works")
	}
	if p, ok := ks.Lookup("new"); !ok || p != "alice" {
		t.Errorf("Lookup(new) = %q, %v; want alice", p, ok)
	}
	if ks.Len() != 2 {
		t.Errorf("Len = %d after Replace; want 2", ks.Len())
	}
}

func TestRemoteIP(t *testing.T) {
	for addr, want := range map[string]string{"192.0.2.1:1234": "192.0.2.1", "[2001:db8::1]:80": "2001:db8::1", "pipe": "pipe"} {
		if got := transport.RemoteIP(&http.Request{RemoteAddr: addr}); got != want {
			t.Errorf("RemoteIP(%q) = %q, want %q", addr, got, want)
		}
	}
}
