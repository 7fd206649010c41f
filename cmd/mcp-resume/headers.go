package main

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
)

// headerList is a repeatable flag of HTTP headers, each "Name: value", as
// mcp-remote's --header takes them: ${VAR} in a value is replaced by the
// environment variable VAR, so that a secret sits in the launching app's "env"
// block, not in the arguments every user of the machine can see.
type headerList struct{ h http.Header }

func (l *headerList) String() string {
	if l == nil || l.h == nil {
		return ""
	}
	return strings.Join(sortedKeys(l.h), ", ") // names only: values may be secrets
}

// headerName is a header field name: an RFC 9110 token.
var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func (l *headerList) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || !headerName.MatchString(name) {
		return fmt.Errorf("want Name: value, got a header without a valid name")
	}
	var missing string
	value = envRef.ReplaceAllStringFunc(value, func(ref string) string {
		v, set := os.LookupEnv(ref[2 : len(ref)-1])
		if !set && missing == "" {
			missing = ref
		}
		return v
	})
	if missing != "" {
		return fmt.Errorf("header %s: %s is not set in the environment", name, missing)
	}
	if strings.ContainsFunc(value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
		return fmt.Errorf("header %s: its value is not a valid header value", name)
	}
	if l.h == nil {
		l.h = http.Header{}
	}
	l.h.Add(name, value)
	return nil
}

func sortedKeys(h http.Header) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// withTokenFrom is h (cloned) with an Authorization bearer token read from the
// environment variable env, for an upstream (--upstream-token-env, an
// upstream's tokenEnv); h as it is when env is "". what names the setting in
// the error of a variable not set.
func withTokenFrom(h http.Header, env, what string) (http.Header, error) {
	h = h.Clone()
	if env == "" {
		return h, nil
	}
	tok := os.Getenv(env)
	if tok == "" {
		return nil, fmt.Errorf("%s: %s is not set or empty", what, env)
	}
	if h == nil {
		h = http.Header{}
	}
	h.Set("Authorization", "Bearer "+tok)
	return h, nil
}
