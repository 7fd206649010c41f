package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/audit"
	"github.com/mcp-resume/mcp-resume/config"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/resume/cluster"
	"github.com/mcp-resume/mcp-resume/servers/conformance"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
)

// policySource is where serve's policies come from: the --config file, then
// the flags given on the command line, which override what the file says for
// what they name (--default-policy, --policy, --restartable), then what the
// server's tools need (the gateway's, the demo's and the conformance set's
// task modes). Read at start, and again at each reload.
type policySource struct {
	file                                 string // --config; "" none
	defaultPolicy, policies, restartable string
	defaultSet, policiesSet              bool // given on the command line
	gateway, conformance                 bool
	arguments                            audit.Rules // --audit-arguments
}

func newPolicySource(f *serveFlags, fs *flag.FlagSet) *policySource {
	src := &policySource{file: f.config, defaultPolicy: f.defaultPolicy, policies: f.policies, restartable: f.restartable,
		gateway: f.gateway, conformance: f.conformance}
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "default-policy":
			src.defaultSet = true
		case "policy":
			src.policiesSet = true
		}
	})
	return src
}

// policies is what a policySource gives: the default, the named tools', the
// scopes the file names and the file's hash ("" without one).
type policies struct {
	def    mcp.Policy
	tools  map[string]mcp.Policy
	scopes map[string][]string
	hash   string

	// A gateway of several: its upstreams as the file says them (read at
	// start), the conflict rule, and each upstream's policies, by name.
	upstreams []config.Upstream
	conflict  string
	ups       map[string]upPolicies
}

// upPolicies are one upstream's policies: its default and its named tools
// (by its names).
type upPolicies struct {
	def   mcp.Policy
	tools map[string]mcp.Policy
}

// of is the policy of the upstream's tool name.
func (u upPolicies) of(name string) mcp.Policy {
	if p, ok := u.tools[name]; ok {
		return p
	}
	return u.def
}

// load reads the file, when there is one, and puts the policies together.
func (src *policySource) load() (*policies, error) {
	out := &policies{tools: map[string]mcp.Policy{}, scopes: map[string][]string{}, ups: map[string]upPolicies{}}
	var file *config.File
	base, err := config.ParseResume(src.defaultPolicy)
	if err != nil {
		return nil, fmt.Errorf("--default-policy: %w", err)
	}
	out.def = mcp.Policy{Mode: base.Mode, After: base.After}
	if src.file != "" {
		var err error
		if file, err = config.Read(src.file); err != nil {
			return nil, fmt.Errorf("--config %w", err)
		}
		if len(file.Upstreams) > 0 && !src.gateway {
			return nil, fmt.Errorf("--config %s: upstreams are a gateway's (mcp-resume gateway --config)", src.file)
		}
		// The file's defaults on top of the server's; --default-policy, when
		// given, over the file's.
		out.def, out.tools = file.Policies(mcp.Policy{Mode: mcp.Always})
		if src.defaultSet {
			out.def.Mode, out.def.After = base.Mode, base.After
		}
		out.scopes, out.hash = file.ToolScopes(), file.Hash
	}
	named, err := parsePolicies(src.policies)
	if err != nil {
		return nil, fmt.Errorf("--policy: %w", err)
	}
	for name, r := range named {
		p, ok := out.tools[name]
		if !ok {
			p = out.def
		}
		p.Mode, p.After = r.Mode, r.After
		out.tools[name] = p
	}
	def, tools := out.def, out.tools
	switch {
	case src.gateway: // an upstream tool becomes a task for a client that declares Tasks
		def.Task = mcp.AsTask
		for name, p := range tools {
			p.Task = mcp.AsTask
			tools[name] = p
		}
	case src.conformance: // the fixture set's own policies, under any given otherwise
		for name, p := range conformance.Policies() {
			if _, set := tools[name]; !set {
				tools[name] = p
			}
		}
	default: // which demo tools may become tasks; when, the policies say
		for name, p := range demo.Policies() {
			q, set := tools[name]
			if !set {
				q = def
			}
			q.Task = p.Task
			tools[name] = q
		}
	}
	for _, name := range splitList(src.restartable) {
		p, ok := tools[name]
		if !ok {
			p = def
		}
		p.Restartable = true
		tools[name] = p
	}
	for name, r := range src.arguments {
		p, ok := tools[name]
		if !ok {
			p = def
		}
		p.Arguments = r
		tools[name] = p
	}
	out.def = def
	if file != nil {
		out.upstreams = file.Upstreams
		if file.Aggregate != nil {
			out.conflict = file.Aggregate.Conflict
		}
		for _, u := range file.Upstreams {
			d, ts := u.Policies(def)
			out.ups[u.Name] = upPolicies{def: d, tools: ts}
		}
	}
	return out, nil
}

// parsePolicies reads --policy: name=always|never|after:DURATION, comma-separated.
func parsePolicies(s string) (map[string]config.Resume, error) {
	out := map[string]config.Resume{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		name, val, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: want name=always|never|after:DURATION", kv)
		}
		r, err := config.ParseResume(val)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = r
	}
	return out, nil
}

// policyMetrics are the policies' metrics: the policy file in effect
// (mcp_resume_config_info, its hash) and the calls a tool's limits refused.
type policyMetrics struct {
	info    *prometheus.GaugeVec
	refused *prometheus.CounterVec
	queued  prometheus.GaugeFunc
	core    atomic.Pointer[mcp.Server] // for queued, once made
	mu      sync.Mutex
	hash    string
}

func newPolicyMetrics() *policyMetrics {
	m := &policyMetrics{
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "mcp_resume_config_info",
			Help: "1 for the policy file in effect (--config), labelled with the SHA-256 of its bytes"}, []string{"sha256"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcp_resume_calls_refused_total",
			Help: "tools/call refused: by its tool's limits (its policy's rate or concurrency), the principal's requests in flight, or the server overloaded; by tool (empty for a name no tool has), principal (authenticated or anonymous) and reason"},
			[]string{"tool", "principal", "reason"}),
	}
	m.queued = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcp_resume_calls_queued",
		Help: "tools/call waiting for a place under its tool's concurrency (its policy's queue)"}, func() float64 {
		if c := m.core.Load(); c != nil {
			return float64(c.Queued())
		}
		return 0
	})
	return m
}

func (m *policyMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.info, m.refused, m.queued}
}

// inEffect records the file whose hash is in effect now.
func (m *policyMetrics) inEffect(hash string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hash != "" {
		m.info.DeleteLabelValues(m.hash)
	}
	m.hash = hash
	if hash != "" {
		m.info.WithLabelValues(hash).Set(1)
	}
}

// onRefused is the core's Options.OnRefused.
func (m *policyMetrics) onRefused(tool string, authenticated bool, reason spec.Reason) {
	class := "anonymous"
	if authenticated {
		class = "authenticated"
	}
	m.refused.WithLabelValues(tool, class, string(reason)).Inc()
}

// clusterRates is the core's Rates on the cluster's shared buckets.
type clusterRates struct{ r *cluster.Rates }

func (c clusterRates) Take(ctx context.Context, tool, principal string, rate mcp.Rate) (bool, time.Duration, error) {
	return c.r.Take(ctx, tool, principal, rate.Calls, rate.Per)
}

// policyPoll is how often the policy file is looked at for a change (its size
// and modification time, then its bytes' hash).
const policyPoll = 2 * time.Second

// watchPolicies reloads src's policies (apply puts them in effect) on SIGHUP and when its file
// changes, until ctx ends. A file that does not read is refused, with its line
// and reason in the log, and the policies in effect stay. A call that runs
// keeps the policy it started with.
func watchPolicies(ctx context.Context, src *policySource, apply func(*policies), m *policyMetrics, current string, log zerolog.Logger) {
	if src.file == "" {
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	tick := time.NewTicker(policyPoll)
	defer tick.Stop()
	seen := stamp(src.file)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		case <-tick.C:
			now := stamp(src.file)
			if now == seen {
				continue
			}
			seen = now
		}
		p, err := src.load()
		if err != nil {
			log.Error().Err(err).Msg("the policy file does not read; the policies in effect stay")
			continue
		}
		if p.hash == current {
			continue
		}
		apply(p)
		m.inEffect(p.hash)
		log.Info().Str("file", src.file).Str("sha256", p.hash).Int("tools", len(p.tools)).Msg("policies reloaded")
		current = p.hash
	}
}

// stamp is what tells a file changed without reading it: its size and
// modification time ("" when it cannot be read).
func stamp(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	return fmt.Sprint(fi.Size(), fi.ModTime().UnixNano())
}

const configUsage = `usage: mcp-resume config check FILE

Reads the policy file FILE as serve --config and gateway --config would, and
prints each tool's policy (and each upstream's, for a gateway of several) and the
file's SHA-256 (the label of mcp_resume_config_info), or the line and the reason it
is refused for (exit status 2).
The schema for editors: config/schema.json in the repository.
`

// configCmd runs the config command.
func configCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(stdout, configUsage)
		return nil
	}
	if len(args) != 2 || args[0] != "check" {
		fmt.Fprint(stderr, configUsage)
		return errors.New("config: want check FILE")
	}
	file, err := config.Read(args[1])
	if err != nil {
		return err
	}
	def, tools := file.Policies(mcp.Policy{Mode: mcp.Always})
	fmt.Fprintf(stdout, "%s: version %d, sha256 %s\n", args[1], file.Version, file.Hash)
	fmt.Fprintf(stdout, "  (default)  %s\n", describePolicy(def, nil))
	scopes := file.ToolScopes()
	for _, name := range slices.Sorted(maps.Keys(tools)) {
		fmt.Fprintf(stdout, "  %-10s %s\n", name, describePolicy(tools[name], scopes[name]))
	}
	for _, u := range file.Upstreams {
		// Secrets stay out: a URL without its user and query, a command's
		// program without its arguments, no header.
		where := "url (not one url.Parse reads)"
		if p, err := url.Parse(u.URL); err == nil {
			p.User, p.RawQuery, p.Fragment = nil, "", ""
			where = "url " + p.String()
		}
		if len(u.Command) > 0 {
			where = fmt.Sprintf("command %s and %d arguments", u.Command[0], len(u.Command)-1)
		}
		fmt.Fprintf(stdout, "upstream %s: %s (alone at /servers/%s/mcp, with the others at /mcp)\n", u.Name, where, u.Name)
		udef, utools := u.Policies(def)
		fmt.Fprintf(stdout, "  (default)  %s\n", describePolicy(udef, nil))
		for _, name := range slices.Sorted(maps.Keys(utools)) {
			fmt.Fprintf(stdout, "  %-10s %s\n", name, describePolicy(utools[name], nil))
		}
	}
	return nil
}

// describePolicy writes p in the file's words.
func describePolicy(p mcp.Policy, scopes []string) string {
	var b strings.Builder
	switch p.Mode {
	case mcp.Always:
		b.WriteString("resume always")
	case mcp.Never:
		b.WriteString("resume never")
	case mcp.After:
		fmt.Fprintf(&b, "resume after:%v", p.After)
	}
	if p.Restartable {
		b.WriteString(", restartable")
	}
	if p.Timeout > 0 {
		fmt.Fprintf(&b, ", timeout %v", p.Timeout)
	}
	if c := p.Concurrency; c.Max > 0 || c.PerPrincipal > 0 {
		fmt.Fprintf(&b, ", concurrency max %d per principal %d", c.Max, c.PerPrincipal)
		if c.Queue > 0 {
			fmt.Fprintf(&b, " (queue %d, wait %v)", c.Queue, c.Wait)
		}
	}
	if r := p.Rate; r.Calls > 0 {
		fmt.Fprintf(&b, ", rate %d per %v per principal", r.Calls, r.Per)
	}
	if len(scopes) > 0 {
		fmt.Fprintf(&b, ", scopes %s", strings.Join(scopes, " "))
	}
	return b.String()
}
