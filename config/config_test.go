package config_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/mcp-resume/mcp-resume/audit"
	"github.com/mcp-resume/mcp-resume/config"
	"github.com/mcp-resume/mcp-resume/mcp"
)

// The example file reads as docs/policies.md says: the defaults apply to every
// tool, a tool's own fields replace theirs.
func TestExample(t *testing.T) {
	f, err := config.Read("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	def, tools := f.Policies(mcp.Policy{Mode: mcp.Always})
	hour := mcp.Rate{Calls: 600, Per: time.Hour}
	if def.Mode != mcp.Always || def.Timeout != time.Hour || def.Rate != hour {
		t.Errorf("defaults %+v", def)
	}
	want := map[string]mcp.Policy{
		"deploy": {Mode: mcp.Always, Timeout: 20 * time.Minute, Rate: mcp.Rate{Calls: 10, Per: time.Hour}, Arguments: audit.RuleHash,
			Concurrency: mcp.Concurrency{Max: 2, PerPrincipal: 1, Queue: 10, Wait: 2 * time.Minute}},
		"echo":      {Mode: mcp.Never, Timeout: time.Hour, Rate: hour},
		"countdown": {Mode: mcp.After, After: 5 * time.Second, Restartable: true, Timeout: time.Hour, Rate: hour},
	}
	if len(tools) != len(want) {
		t.Fatalf("tools %+v", tools)
	}
	for name, p := range want {
		if tools[name] != p {
			t.Errorf("%s: %+v, want %+v", name, tools[name], p)
		}
	}
	if s := f.ToolScopes(); len(s) != 1 || strings.Join(s["deploy"], " ") != "deploy:write" {
		t.Errorf("scopes %v", s)
	}
	if len(f.Hash) != 64 {
		t.Errorf("hash %q", f.Hash)
	}
}

// Every bad file is refused with the line it is about and why.
func TestRefused(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"", "1: the file is empty"},
		{"version: 2", "1: version 2"},
		{"version: 1\ntools:\n  deploy:\n    timout: 20m\n", "4: unknown key timout"},
		{"version: 1\ntools:\n  deploy:\n    timeout: 20m\n    Timeout: 1m\n", "5: unknown key Timeout"},
		{"version: 1\ntools:\n  deploy:\n    timeout: 20m\n    timeout: 1m\n", "5: mapping key \"timeout\" already defined at line 4"},
		{"version: 1\ntools:\n  deploy:\n    timeout: 20\n", `4: want a string such as "20m", not "20"`},
		{"version: 1\ntools:\n  deploy:\n    timeout: -1m\n", `4: "-1m": want a duration`},
		{"version: 1\ntools:\n  deploy: {}\n  deploy: {}\n", `4: tool "deploy" named twice`},
		{"version: 1\ntools:\n  deploy:\n    concurrency: {max: 2, queue: 3}\n", "4: concurrency: a queue needs a wait"},
		{"version: 1\ntools:\n  deploy:\n    concurrency: {max: 2, wait: 3s}\n", "4: concurrency: a wait needs a queue"},
		{"version: 1\ntools:\n  deploy:\n    concurrency: {queue: 1, wait: 3s}\n", "4: concurrency: set max, perPrincipal or both"},
		{"version: 1\ntools:\n  deploy:\n    concurrency: {max: -1}\n", "4: concurrency: max, perPrincipal and queue are not negative"},
		{"version: 1\ntools:\n  deploy:\n    concurrency: {max: 1, burst: 2}\n", "4: unknown key burst"},
		{"version: 1\ntools:\n  deploy:\n    resume: sometimes\n", `4: "sometimes": want always, never or after:DURATION`},
		{"version: 1\ntools:\n  deploy:\n    rate: {calls: 0, per: 1h}\n", "4: rate: calls at least 1"},
		{"version: 1\ntools:\n  deploy:\n    rate: {calls: 1}\n", "4: rate: calls at least 1"},
		{"version: 1\ntools:\n  'bad name':\n    timeout: 1m\n", `3: "bad name" is not a tool's name`},
		{"version: 1\ntools: [deploy]\n", "2: tools: want a mapping"},
		{"version: 1\nTools: {}\n", "2: unknown key Tools"},
		{"version: 1\ndefaults:\n  scopes: [a]\n", "3: defaults: scopes are a tool's"},
		{"version: 1\n---\nversion: 1\n", "2: a second document"},
		{"version: 1\ntools:\n  deploy: [1]\n", "3: "},
		{"version: 1\n  bad: indentation\n", "2: "},
		{"version: 1\ntools:\n  deploy:\n    audit: {arguments: shred}\n", `4: audit: arguments "shred": want hash, redact or keep`},
		{"version: 1\nupstreams:\n- {name: fs, url: 'http://x'}\n- {name: fs, url: 'http://y'}\n", `4: upstream "fs" named twice`},
		{"version: 1\nupstreams:\n- {name: Files, url: 'http://x'}\n", `3: upstream name "Files": want 1 to 32 of a-z 0-9 -`},
		{"version: 1\nupstreams:\n- {name: fs, url: 'http://x', env: [A]}\n", "3: upstream fs: env and dir go with a command"},
		{"version: 1\ntools:\n  deploy:\n    audit: {}\n", `4: audit: arguments "": want hash, redact or keep`},
	} {
		_, err := config.Parse([]byte(tc.doc))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error starting %q", tc.doc, err, tc.want)
		}
	}
}

// The JSON Schema and the decoder agree: on the example and on files each
// refuses for a reason the schema can say.
func TestSchemaAgrees(t *testing.T) {
	raw, err := os.ReadFile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{
		string(example),
		"version: 1",
		"version: 1\ndefaults: {resume: 'after:1m30s', timeout: 0s}\n",
		"version: 2",
		"version: 1\ntools:\n  deploy:\n    timout: 20m\n",
		"version: 1\ntools:\n  deploy:\n    timeout: 20\n",
		"version: 1\ntools:\n  deploy:\n    concurrency: {max: 2, queue: 3}\n",
		"version: 1\ntools:\n  deploy:\n    concurrency: {max: 2, wait: 3s}\n",
		"version: 1\ntools:\n  deploy:\n    concurrency: {queue: 1, wait: 3s}\n",
		"version: 1\ntools:\n  deploy:\n    concurrency: {max: 1, burst: 2}\n",
		"version: 1\ntools:\n  deploy:\n    resume: sometimes\n",
		"version: 1\ntools:\n  deploy:\n    rate: {calls: 0, per: 1h}\n",
		"version: 1\ntools:\n  deploy:\n    rate: {calls: 1}\n",
		"version: 1\ntools:\n  'bad name':\n    timeout: 1m\n",
		"version: 1\ndefaults:\n  scopes: [a]\n",
		"version: 1\nextra: 1\n",
		"version: 1\ntools:\n  deploy:\n    audit: {arguments: shred}\n",
		"version: 1\ntools:\n  deploy:\n    audit: {arguments: redact}\n",
		"version: 1\nupstreams:\n- {name: fs, command: [x], env: [HOME]}\n- {name: t, url: 'https://t/mcp', headers: ['X-K: 1'], tools: {deploy: {timeout: 1m}}}\naggregate: {conflict: priority}\n",
		"version: 1\nupstreams:\n- {name: fs}\n",
		"version: 1\nupstreams:\n- {name: fs, command: [x], url: 'http://x'}\n",
		"version: 1\nupstreams:\n- {name: f_s, command: [x]}\n",
		"version: 1\nupstreams:\n- {name: fs, url: 'http://x', env: [A]}\n",
		"version: 1\nupstreams:\n- {name: fs, command: [x], headers: ['A: b']}\n",
		"version: 1\nupstreams:\n- {name: fs, command: [x], tools: {t: {scopes: [a]}}}\n",
		"version: 1\nupstreams:\n- {name: fs, command: [x], defaults: {scopes: [a]}}\n",
		"version: 1\nupstreams:\n- {name: fs, command: [x], extra: 1}\n",
		"version: 1\naggregate: {conflict: merge}\n",
		"version: 1\nupstreams:\n- {name: fs, url: 'ftp://x'}\n",
		"version: 1\nupstreams:\n- {name: fs, url: 'http://x'}\n- {name: FS, url: 'http://y'}\n",
		"version: 1\nupstreams:\n- {name: fs, url: 'http://x', oauth: {clientId: gw, issuer: 'https://i', scopes: [a]}}\n",
		"version: 1\nupstreams:\n- {name: fs, url: 'http://x', oauth: {clientId: gw}}\n",
		"version: 1\nupstreams:\n- {name: fs, command: [x], oauth: {clientId: gw, issuer: i}}\n",
	} {
		var v any
		if err := yaml.Unmarshal([]byte(d), &v); err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(v)
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
		if err != nil {
			t.Fatal(err)
		}
		schemaOK := sch.Validate(inst) == nil
		_, perr := config.Parse([]byte(d))
		if schemaOK != (perr == nil) {
			t.Errorf("%q: the schema says valid %v, the decoder %v", d, schemaOK, perr)
		}
	}
}

// Whatever the file holds, Parse answers: a policy set or an error that starts
// with a line number.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"version: 1\n", "version: 1\ntools:\n  a:\n    timeout: 1m\n", "{", "version: 1\ntools: {a: {rate: {calls: 1, per: 1s}}}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := config.Parse(b)
		if err != nil {
			return
		}
		def, tools := file.Policies(mcp.Policy{})
		for _, p := range append([]mcp.Policy{def}, mapValues(tools)...) {
			if p.Timeout < 0 || p.Rate.Calls < 0 || (p.Rate.Calls > 0 && p.Rate.Per <= 0) || p.Concurrency.Queue < 0 {
				t.Fatalf("%q gave %+v", b, p)
			}
		}
	})
}

func mapValues(m map[string]mcp.Policy) []mcp.Policy {
	var out []mcp.Policy
	for _, p := range m {
		out = append(out, p)
	}
	return out
}
