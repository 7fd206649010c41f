package main

import (
	"bytes"
	"errors"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// helpFlags returns the flags `mcp-resume CMD --help` lists.
func helpFlags(t *testing.T, cmd string) []string {
	t.Helper()
	var errw bytes.Buffer
	if err := run([]string{cmd, "--help"}, nil, &bytes.Buffer{}, &errw); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("%s --help: %v", cmd, err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(errw.String(), -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatalf("%s --help lists no flag:\n%s", cmd, errw.String())
	}
	return names
}

// Help and docs agree: every flag a command's --help lists is in that
// command's page of docs/, and every --flag the docs (and the READMEs) name
// is a flag of one of our commands, or of the other programs they show.
func TestHelpAndDocsAgree(t *testing.T) {
	read := func(path string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", path))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	pages := map[string][]string{ // the page of each command's flags
		"docs/serve.md":   {"serve"},
		"docs/gateway.md": {"gateway"},
		"docs/connect.md": {"connect"},
		"docs/cli.md":     {"call", "status", "task", "tools", "login"},
	}
	serveFlags := helpFlags(t, "serve")
	all := map[string]bool{}
	for page, cmds := range pages {
		text := read(page)
		for _, cmd := range cmds {
			for _, name := range helpFlags(t, cmd) {
				all[name] = true
				if cmd == "gateway" && slices.Contains(serveFlags, name) {
					continue // a serve flag: serve.md's
				}
				if !regexp.MustCompile(`(^|[^a-zA-Z0-9-])--?` + regexp.QuoteMeta(name) + `\b`).MatchString(text) {
					t.Errorf("%s --help lists -%s, which %s does not name", cmd, name, page)
				}
			}
		}
	}
	// cmd/release's flags, every one named in docs/release.md.
	release := read("docs/release.md")
	for _, name := range releaseFlags(t) {
		all[name] = true
		if !regexp.MustCompile(`(^|[^a-zA-Z0-9-])--` + regexp.QuoteMeta(name) + `\b`).MatchString(release) {
			t.Errorf("cmd/release has --%s, which docs/release.md does not name", name)
		}
	}
	// Flags of other programs the docs show: the conformance suite's, mcp-remote's,
	// delve's (design.md's walk), npm publish's, podman's, kubectl's and helm's (deploy.md).
	others := []string{"suite", "requirements", "transport", "expected-failures", "scenario", "stack", "test", "tag",
		"rm", "read-only", "user", "cap-drop", "create-namespace", "from-file", "set"}
	docs, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	for i := range docs {
		docs[i], _ = filepath.Rel(filepath.Join("..", ".."), docs[i])
	}
	for _, page := range append(docs, "README.md", "spec/README.md") {
		for _, m := range regexp.MustCompile(`(?:^|[^a-zA-Z0-9-])--([a-z][a-z0-9-]+)`).FindAllStringSubmatch(read(page), -1) {
			if !all[m[1]] && !slices.Contains(others, m[1]) {
				t.Errorf("%s names --%s, which no command has", page, m[1])
			}
		}
	}
}

// releaseFlags returns the flags cmd/release defines: the names its sources
// give the flag set's String, Bool and Var calls.
func releaseFlags(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "release", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !slices.Contains([]string{"String", "Bool", "Int", "Duration", "Var"}, sel.Sel.Name) {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "fs" {
				return true
			}
			arg := call.Args[0]
			if sel.Sel.Name == "Var" && len(call.Args) > 1 {
				arg = call.Args[1]
			}
			if lit, ok := arg.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if name, err := strconv.Unquote(lit.Value); err == nil {
					names = append(names, name)
				}
			}
			return true
		})
	}
	if len(names) < 3 {
		t.Fatalf("read %d flags from cmd/release: the reading is wrong", len(names))
	}
	return names
}

// Every --flag our own texts name (the usage and --help of each command,
// the hints of its error messages: every string of the package's sources)
// is a flag of one of our commands: a text that suggests a flag gone is a
// user's dead end.
func TestTextsNameOnlyFlags(t *testing.T) {
	all := map[string]bool{"help": true} // the flag package's own
	texts := []string{usage}
	for _, cmd := range []string{"serve", "gateway", "connect", "call", "status", "task", "tools", "login"} {
		for _, name := range helpFlags(t, cmd) {
			all[name] = true
		}
		var errw bytes.Buffer
		_ = run([]string{cmd, "--help"}, nil, &bytes.Buffer{}, &errw)
		texts = append(texts, errw.String())
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					texts = append(texts, s)
				}
			}
			return true
		})
	}
	named := regexp.MustCompile(`(?:^|[^a-zA-Z0-9-])--([a-z][a-z0-9-]+)`)
	for _, text := range texts {
		for _, m := range named.FindAllStringSubmatch(text, -1) {
			if !all[m[1]] {
				t.Errorf("a text names --%s, which no command has: %.200q", m[1], text)
			}
		}
	}
}

// The top-level help names every subcommand of task.
func TestUsageNamesTaskVerbs(t *testing.T) {
	for _, verb := range []string{"get", "result", "cancel", "watch", "list"} {
		if !strings.Contains(usage, verb) {
			t.Errorf("the usage does not name task %s", verb)
		}
	}
}
