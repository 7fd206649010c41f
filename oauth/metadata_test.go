package oauth_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/oauth"
	"github.com/mcp-resume/mcp-resume/transport"
)

// No member of the protected resource metadata is ever null or empty, with
// every combination of the resource server's optional options: a client's
// schema (the TypeScript SDK's) refuses a document with a null member, and
// then takes the MCP server for its own authorization server.
func TestMetadataHasNoNullMember(t *testing.T) {
	nop := zerolog.Nop()
	keys, err := transport.ParseKeys("owner:a-key")
	if err != nil {
		t.Fatal(err)
	}
	optional := []func(*oauth.Options){
		func(o *oauth.Options) { o.Scopes = []string{"mcp:tools"} },
		func(o *oauth.Options) { o.ToolScopes = map[string][]string{"deploy": {"mcp:deploy"}} },
		func(o *oauth.Options) { o.ToolScopes = map[string][]string{"nothing": {}} },
		func(o *oauth.Options) { o.Introspection = "https://as.example.test/introspect" },
		func(o *oauth.Options) { o.IntrospectionClient, o.IntrospectionSecret = "rs", "s" },
		func(o *oauth.Options) { o.Issuers = append(o.Issuers, "https://other.example.test/") },
		func(o *oauth.Options) { o.Resource = "https://mcp.example.test/" },
		func(o *oauth.Options) { o.Skew = time.Minute },
		func(o *oauth.Options) { o.Client = &http.Client{} },
		func(o *oauth.Options) { o.OnRefused = func(string) {} },
		func(o *oauth.Options) { o.Keys = keys },
		func(o *oauth.Options) { o.Logger = &nop },
		func(o *oauth.Options) { o.ClientPrincipal = true },
		func(o *oauth.Options) { o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")} },
		func(o *oauth.Options) { o.Recheck = time.Minute },
	}
	for set := range 1 << len(optional) {
		o := oauth.Options{Resource: resource, Issuers: []string{"https://sso.example.test/realms/mcp"}}
		for i, f := range optional {
			if set&(1<<i) != 0 {
				f(&o)
			}
		}
		rs, err := oauth.New(&o)
		if err != nil {
			t.Fatalf("options %b: %v", set, err)
		}
		w := httptest.NewRecorder()
		rs.MetadataHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, rs.MetadataPaths()[0], nil))
		var doc map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
			t.Fatalf("options %b: %v: %s", set, err, w.Body)
		}
		if bad := emptyMembers("", doc); len(bad) > 0 {
			t.Fatalf("options %b: the metadata has null or empty members %v: %s", set, bad, w.Body)
		}
		if doc["resource"] != o.Resource || !reflect.DeepEqual(doc["authorization_servers"], anySlice(o.Issuers)) {
			t.Fatalf("options %b: %s", set, w.Body)
		}
		scopes, _ := doc["scopes_supported"].([]any)
		if want := len(o.Scopes) > 0 || len(o.ToolScopes["deploy"]) > 0; want != (len(scopes) > 0) {
			t.Fatalf("options %b: scopes_supported %v", set, doc["scopes_supported"])
		}
	}
}

// emptyMembers returns the paths of v's members that are null, empty
// strings, empty arrays or empty objects.
func emptyMembers(path string, v any) []string {
	var bad []string
	switch x := v.(type) {
	case nil:
		return []string{path}
	case string:
		if x == "" {
			return []string{path}
		}
	case []any:
		if len(x) == 0 {
			return []string{path}
		}
		for i, e := range x {
			bad = append(bad, emptyMembers(path+"["+strconv.Itoa(i)+"]", e)...)
		}
	case map[string]any:
		if len(x) == 0 {
			return []string{path}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			bad = append(bad, emptyMembers(path+"."+k, x[k])...)
		}
	}
	return bad
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
