// Package config reads the operator's policy file: each tool's resume policy
// and limits (a timeout, how many run at once, how many each principal starts
// per period), and a default for the tools it does not name, in YAML. The file
// is decoded once, strictly: an unknown key, a key given twice, a value of the
// wrong kind or out of range is refused with its line. schema.json is its JSON
// Schema, for editors.
package config

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcp-resume/mcp-resume/audit"
	"github.com/mcp-resume/mcp-resume/mcp"
)

// Version is the one version of the file's format.
const Version = 1

// File is a policy file.
type File struct {
	// Version is the format's version: 1.
	Version int `yaml:"version"`
	// Defaults is the policy of every tool that Tools does not name.
	Defaults Defaults `yaml:"defaults"`
	// Tools is each named tool's policy: what it sets replaces the default's,
	// what it leaves out is the default's.
	Tools Tools `yaml:"tools"`
	// Upstreams are the servers of a gateway of several (mcp-resume gateway
	// --config), in order (the Priority rule's); read at start.
	Upstreams Upstreams `yaml:"upstreams"`
	// Aggregate is how the gateway's aggregated endpoint names its
	// upstreams' tools and prompts.
	Aggregate *Aggregate `yaml:"aggregate"`

	// Hash is the SHA-256 of the file's bytes, hex (not read from the file).
	Hash string `yaml:"-"`
}

// Upstream is one server behind a gateway of several: a stdio command (with
// the environment it may see) or a URL (with the headers it is sent), and its
// own policies on top of the file's.
type Upstream struct {
	// Name names it: its path (/servers/NAME/mcp) and its tools' prefix
	// (NAME__tool); 1 to 32 of a-z 0-9 -.
	Name string `yaml:"name"`
	// Command starts it as a stdio child; Env is what of this environment
	// it sees (NAME, or NAME=value: --env's form); Dir its working directory.
	Command []string `yaml:"command"`
	Env     []string `yaml:"env"`
	Dir     string   `yaml:"dir"`
	// URL reaches it over Streamable HTTP or WebSocket; Headers are sent
	// with every request ("Name: value", ${VAR} read from the environment:
	// --upstream-header's form); TokenEnv names a variable holding a
	// bearer token.
	URL      string   `yaml:"url"`
	Headers  []string `yaml:"headers"`
	TokenEnv string   `yaml:"tokenEnv"`
	// OAuth calls it with tokens of the client credentials grant
	// (--upstream-oauth-client-id's).
	OAuth *UpstreamOAuth `yaml:"oauth"`
	// Defaults and Tools are its tools' policies (names as the upstream
	// says them), over the file's defaults.
	Defaults Defaults `yaml:"defaults"`
	Tools    Tools    `yaml:"tools"`
}

// UpstreamOAuth is the gateway's OAuth client for an upstream: its id, the
// variable holding its secret, the issuer it is registered at (its secret
// goes to that issuer's token endpoint only) and the scopes it asks for
// (default: those the upstream names).
type UpstreamOAuth struct {
	ClientID        string   `yaml:"clientId"`
	ClientSecretEnv string   `yaml:"clientSecretEnv"`
	Issuer          string   `yaml:"issuer"`
	Scopes          []string `yaml:"scopes"`
}

func (o *UpstreamOAuth) UnmarshalYAML(n *yaml.Node) error {
	type plain UpstreamOAuth
	if err := decodeStrict(n, (*plain)(o)); err != nil {
		return err
	}
	if o.ClientID == "" || o.Issuer == "" {
		return lineErr(n, errors.New("oauth: clientId and issuer are required"))
	}
	return nil
}

// upstreamName is what an upstream's name may be (gateway.CheckName's rule).
// Lower case alone: a name is a directory's name too (--data-dir), on file
// systems that may not tell case apart.
var upstreamName = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// Upstreams are a gateway's upstreams, in order.
type Upstreams []Upstream

func (us *Upstreams) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return lineErr(n, fmt.Errorf("upstreams: want a list of upstreams, not %s", kindOf(n)))
	}
	seen := map[string]bool{}
	for _, v := range n.Content {
		var u Upstream
		type plain Upstream
		if err := decodeStrict(v, (*plain)(&u)); err != nil {
			return err
		}
		switch {
		case !upstreamName.MatchString(u.Name):
			return lineErr(v, fmt.Errorf("upstream name %q: want 1 to 32 of a-z 0-9 - (it starts its tools' names, NAME__tool)", u.Name))
		case seen[u.Name]:
			return lineErr(v, fmt.Errorf("upstream %q named twice", u.Name))
		case (len(u.Command) == 0) == (u.URL == ""):
			return lineErr(v, fmt.Errorf("upstream %s: give command or url, one of them", u.Name))
		case u.URL != "" && !slices.ContainsFunc([]string{"http://", "https://", "ws://", "wss://"}, func(p string) bool { return strings.HasPrefix(u.URL, p) }):
			return lineErr(v, fmt.Errorf("upstream %s: url %q: want http://, https://, ws:// or wss://", u.Name, u.URL))
		case u.URL != "" && (len(u.Env) > 0 || u.Dir != ""):
			return lineErr(v, fmt.Errorf("upstream %s: env and dir go with a command", u.Name))
		case u.URL == "" && (len(u.Headers) > 0 || u.TokenEnv != "" || u.OAuth != nil):
			return lineErr(v, fmt.Errorf("upstream %s: headers, tokenEnv and oauth go with a url", u.Name))
		}
		seen[u.Name] = true
		*us = append(*us, u)
	}
	return nil
}

// Aggregate is the aggregated endpoint's naming.
type Aggregate struct {
	// Conflict: prefix (every name NAME__tool, the default), conflict
	// (prefixed only when two upstreams offer a name) or priority (the first
	// upstream keeps a name, the others' are prefixed).
	Conflict string `yaml:"conflict"`
}

func (a *Aggregate) UnmarshalYAML(n *yaml.Node) error {
	type plain Aggregate
	if err := decodeStrict(n, (*plain)(a)); err != nil {
		return err
	}
	switch a.Conflict {
	case "", "prefix", "conflict", "priority":
		return nil
	}
	return lineErr(n, fmt.Errorf("aggregate: conflict %q: want prefix, conflict or priority", a.Conflict))
}

// Policies returns an upstream's policies: its defaults over the
// file's (def, as Policies returned it), its tools over its defaults.
func (u *Upstream) Policies(def mcp.Policy) (mcp.Policy, map[string]mcp.Policy) {
	d := u.Defaults.apply(def)
	tools := make(map[string]mcp.Policy, len(u.Tools))
	for name, t := range u.Tools {
		tools[name] = t.apply(d)
	}
	return d, tools
}

// Tool is a tool's policy in the file. A field left out is the default's (for
// Defaults, the server's own default).
type Tool struct {
	// Resume is when the tool's calls become resumable: "always", "never" or
	// "after:DURATION" (the --policy flag's values).
	Resume *Resume `yaml:"resume"`
	// Restartable: safe to run twice; with a durable store, a call that was
	// running when its server stopped runs again (--restartable).
	Restartable *bool `yaml:"restartable"`
	// Timeout ends a call that runs longer (reason timeout); "0s": none.
	Timeout *Duration `yaml:"timeout"`
	// Concurrency bounds the calls that run at once.
	Concurrency *Concurrency `yaml:"concurrency"`
	// Rate bounds the calls each principal starts per period.
	Rate *Rate `yaml:"rate"`
	// Scopes are the OAuth scopes a call of the tool needs besides
	// --oauth-scope (--oauth-tool-scope); only in Tools.
	Scopes []string `yaml:"scopes"`
	// Audit is what the audit trail writes of the tool's calls
	// (--audit-arguments).
	Audit *Audit `yaml:"audit"`
}

// Audit is a tool's part in the audit trail.
type Audit struct {
	// Arguments: hash, redact or keep (audit.Rule); none: not written.
	Arguments audit.Rule `yaml:"arguments"`
}

func (a *Audit) UnmarshalYAML(n *yaml.Node) error {
	type plain Audit
	if err := decodeStrict(n, (*plain)(a)); err != nil {
		return err
	}
	if _, err := audit.NewRules(map[string]string{"t": string(a.Arguments)}); err != nil || a.Arguments == "" {
		return lineErr(n, fmt.Errorf("audit: arguments %q: want hash, redact or keep", a.Arguments))
	}
	return nil
}

// Defaults is the default policy: a Tool without Scopes.
type Defaults struct{ Tool }

func (d *Defaults) UnmarshalYAML(n *yaml.Node) error {
	if err := decodeStrict(n, &d.Tool); err != nil {
		return err
	}
	if len(d.Scopes) > 0 {
		return lineErr(n, errors.New("defaults: scopes are a tool's: name the tools under tools"))
	}
	return nil
}

// Tools is the named tools' policies.
type Tools map[string]Tool

func (ts *Tools) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return lineErr(n, fmt.Errorf("tools: want a mapping of tool names to policies, not %s", kindOf(n)))
	}
	*ts = make(Tools, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || !toolName.MatchString(k.Value) {
			return lineErr(k, fmt.Errorf("%s is not a tool's name (letters, digits, _ . -; 1 to 128)", kindOf(k)))
		}
		if _, dup := (*ts)[k.Value]; dup {
			return lineErr(k, fmt.Errorf("tool %q named twice", k.Value))
		}
		var t Tool
		if err := decodeStrict(v, &t); err != nil {
			return err
		}
		(*ts)[k.Value] = t
	}
	return nil
}

// Resume is a resume policy: mcp.Policy's Mode and After.
type Resume struct {
	Mode  mcp.Mode
	After time.Duration
}

// ParseResume reads "always", "never" or "after:DURATION".
func ParseResume(s string) (Resume, error) {
	switch {
	case s == "always":
		return Resume{Mode: mcp.Always}, nil
	case s == "never":
		return Resume{Mode: mcp.Never}, nil
	case strings.HasPrefix(s, "after:"):
		d, err := time.ParseDuration(strings.TrimPrefix(s, "after:"))
		if err != nil || d < 0 {
			return Resume{}, fmt.Errorf("%q: bad duration", s)
		}
		return Resume{Mode: mcp.After, After: d}, nil
	}
	return Resume{}, fmt.Errorf("%q: want always, never or after:DURATION", s)
}

func (r *Resume) UnmarshalYAML(n *yaml.Node) error {
	s, err := scalar(n, "!!str")
	if err != nil {
		return err
	}
	if *r, err = ParseResume(s); err != nil {
		return lineErr(n, err)
	}
	return nil
}

// Duration is a duration written as Go writes one ("90s", "20m", "1h30m").
type Duration time.Duration

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	s, err := scalar(n, "!!str")
	if err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return lineErr(n, fmt.Errorf("%q: want a duration such as 90s, 20m or 1h30m", s))
	}
	*d = Duration(v)
	return nil
}

// Concurrency is mcp.Concurrency in the file.
type Concurrency struct {
	Max          int      `yaml:"max"`
	PerPrincipal int      `yaml:"perPrincipal"`
	Queue        int      `yaml:"queue"`
	Wait         Duration `yaml:"wait"`
}

func (c *Concurrency) UnmarshalYAML(n *yaml.Node) error {
	type plain Concurrency
	if err := decodeStrict(n, (*plain)(c)); err != nil {
		return err
	}
	switch {
	case c.Max < 0 || c.PerPrincipal < 0 || c.Queue < 0:
		return lineErr(n, errors.New("concurrency: max, perPrincipal and queue are not negative"))
	case c.Max == 0 && c.PerPrincipal == 0:
		return lineErr(n, errors.New("concurrency: set max, perPrincipal or both (0 is no bound)"))
	case c.Queue > 0 && c.Wait == 0:
		return lineErr(n, errors.New("concurrency: a queue needs a wait (how long a call waits for a place)"))
	case c.Queue == 0 && c.Wait != 0:
		return lineErr(n, errors.New("concurrency: a wait needs a queue (how many calls may wait)"))
	}
	return nil
}

// Rate is mcp.Rate in the file.
type Rate struct {
	Calls int      `yaml:"calls"`
	Per   Duration `yaml:"per"`
}

func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	type plain Rate
	if err := decodeStrict(n, (*plain)(r)); err != nil {
		return err
	}
	if r.Calls < 1 || r.Per <= 0 {
		return lineErr(n, errors.New("rate: calls at least 1 per a period over 0 (calls: 10, per: 1h)"))
	}
	return nil
}

// toolName is what a tool's name may be (2025-11-25's rule, which
// 2026-07-28 keeps).
var toolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// Read reads and checks the policy file at path.
func Read(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	return f, nil
}

// Parse reads and checks a policy file's bytes. Its errors start with the line
// they are about ("12: ...").
func Parse(b []byte) (*File, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("1: the file is empty: want at least version: 1")
		}
		return nil, yamlErr(err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return nil, fmt.Errorf("%d: a second document: want one", more.Line)
	}
	if f.Version != Version {
		return nil, fmt.Errorf("1: version %d: want version: %d", f.Version, Version)
	}
	sum := sha256.Sum256(b)
	f.Hash = hex.EncodeToString(sum[:])
	return &f, nil
}

// Policies returns the file's policies on top of base, the server's own default
// (the tools' and the default's fields the file leaves out are base's).
func (f *File) Policies(base mcp.Policy) (def mcp.Policy, tools map[string]mcp.Policy) {
	def = f.Defaults.apply(base)
	tools = make(map[string]mcp.Policy, len(f.Tools))
	for name, t := range f.Tools {
		tools[name] = t.apply(def)
	}
	return def, tools
}

// ToolScopes returns the scopes the file's tools need (Tool.Scopes): by
// their names, and an upstream's tools' as UPSTREAM/TOOL.
func (f *File) ToolScopes() map[string][]string {
	out := map[string][]string{}
	for name, t := range f.Tools {
		if len(t.Scopes) > 0 {
			out[name] = slices.Clone(t.Scopes)
		}
	}
	for _, u := range f.Upstreams {
		for name, t := range u.Tools {
			if len(t.Scopes) > 0 {
				out[u.Name+"/"+name] = slices.Clone(t.Scopes)
			}
		}
	}
	return out
}

// apply returns p with what t sets.
func (t Tool) apply(p mcp.Policy) mcp.Policy {
	if t.Resume != nil {
		p.Mode, p.After = t.Resume.Mode, t.Resume.After
	}
	if t.Restartable != nil {
		p.Restartable = *t.Restartable
	}
	if t.Timeout != nil {
		p.Timeout = time.Duration(*t.Timeout)
	}
	if c := t.Concurrency; c != nil {
		p.Concurrency = mcp.Concurrency{Max: c.Max, PerPrincipal: c.PerPrincipal, Queue: c.Queue, Wait: time.Duration(c.Wait)}
	}
	if r := t.Rate; r != nil {
		p.Rate = mcp.Rate{Calls: r.Calls, Per: time.Duration(r.Per)}
	}
	if a := t.Audit; a != nil {
		p.Arguments = a.Arguments
	}
	return p
}

// decodeStrict decodes mapping n into the struct out points to, refusing a key
// that is none of its fields' (a node decodes without the decoder's
// KnownFields).
func decodeStrict(n *yaml.Node, out any) error {
	if n.Kind == yaml.MappingNode {
		t := reflect.TypeOf(out).Elem()
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if !hasKey(t, k.Value) {
				return lineErr(k, fmt.Errorf("unknown key %s", k.Value))
			}
		}
	}
	return n.Decode(out)
}

// hasKey reports whether struct type t has a field that YAML calls key.
func hasKey(t reflect.Type, key string) bool {
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == key && name != "-" {
			return true
		}
	}
	return false
}

// scalar returns n's value when n is a scalar of tag.
func scalar(n *yaml.Node, tag string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != tag {
		return "", lineErr(n, fmt.Errorf("want a string such as \"20m\", not %s", kindOf(n)))
	}
	return n.Value, nil
}

func kindOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

// lineError is an error about the node at line.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("%d: %v", e.line, e.err) }
func (e *lineError) Unwrap() error { return e.err }

func lineErr(n *yaml.Node, err error) error { return &lineError{n.Line, err} }

// yamlErr words a decoder's error as "LINE: reason".
func yamlErr(err error) error {
	var le *lineError
	if errors.As(err, &le) {
		return le
	}
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		return errors.New(unknownField.ReplaceAllString(strings.TrimPrefix(te.Errors[0], "line "), "unknown key $1"))
	}
	return errors.New(unknownField.ReplaceAllString(strings.TrimPrefix(strings.TrimPrefix(err.Error(), "yaml: "), "line "), "unknown key $1"))
}

// unknownField is how the decoder says a key is none of the type's.
var unknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)
