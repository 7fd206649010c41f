package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The module's root, from this package's directory.
const moduleRoot = "../.."

const modulePath = "github.com/mcp-resume/mcp-resume/"

// designDoc returns docs/design.md.
func designDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the text of the section of doc titled title ("## title"),
// up to the next section.
func section(t *testing.T, doc, title string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n## "+title+"\n")
	if !ok {
		t.Fatalf("design.md has no section %q", title)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// packages lists the module's packages and their imports of the module's own
// packages, by path relative to the module.
func packages(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = moduleRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		p := strings.TrimPrefix(f[0], modulePath)
		pkgs[p] = nil
		for _, imp := range f[1:] {
			if rel, ok := strings.CutPrefix(imp, modulePath); ok {
				pkgs[p] = append(pkgs[p], rel)
			}
		}
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	return pkgs
}

// pathRE finds what design.md names as a path of the repository: a top
// directory of ours, then a slash and more.
var pathRE = regexp.MustCompile("(?:^|[\\s(`|,])((?:cmd|mcp|resume|transport|spec|gateway|oauth|metrics|web|servers|testkit|internal|docs|interop|\\.ci)/[A-Za-z0-9_.*{},/-]*[A-Za-z0-9_*}/])")

// Every path design.md names exists (a glob: at least one match; braces:
// each of their choices).
func TestDesignPathsExist(t *testing.T) {
	doc := designDoc(t)
	seen := 0
	for _, m := range pathRE.FindAllStringSubmatch(doc, -1) {
		for _, p := range expandBraces(m[1]) {
			seen++
			matches, err := filepath.Glob(filepath.Join(moduleRoot, filepath.FromSlash(strings.TrimSuffix(p, "/"))))
			if err != nil || len(matches) == 0 {
				t.Errorf("design.md names %s, which does not exist", p)
			}
		}
	}
	if seen < 50 {
		t.Fatalf("found %d paths in design.md: the pattern reads it wrong", seen)
	}
}

// expandBraces expands one {a,b} group of p.
func expandBraces(p string) []string {
	i, j := strings.Index(p, "{"), strings.Index(p, "}")
	if i < 0 || j < i {
		return []string{p}
	}
	var out []string
	for _, alt := range strings.Split(p[i+1:j], ",") {
		out = append(out, p[:i]+alt+p[j+1:])
	}
	return out
}

// Every package of the module has a row in design.md's "Packages" table, and
// every row is a package.
func TestDesignPackagesTable(t *testing.T) {
	rows := map[string]bool{}
	for _, line := range strings.Split(section(t, designDoc(t), "Packages"), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.TrimSpace(cells[1]) == "package" || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		rows[strings.TrimSpace(cells[1])] = true
	}
	pkgs := packages(t)
	for p := range pkgs {
		if !rows[p] {
			t.Errorf("package %s has no row in design.md's Packages table", p)
		}
	}
	for r := range rows {
		if _, ok := pkgs[r]; !ok {
			t.Errorf("design.md's Packages table has a row for %s, which is no package", r)
		}
	}
}

// importRule is a line of design.md's import table: packages matching one of
// from may import packages matching one of to.
type importRule struct {
	from, to []string
	any      bool // "anything below"
}

// importRules reads the fenced block of design.md's "Seams" section.
func importRules(t *testing.T) []importRule {
	t.Helper()
	sec := section(t, designDoc(t), "Seams, and what may import what")
	_, block, _ := strings.Cut(sec, "```\n")
	block, _, _ = strings.Cut(block, "```")
	var rules []importRule
	for _, line := range strings.Split(block, "\n") {
		left, right, ok := strings.Cut(line, "─►")
		if !ok {
			continue
		}
		if i := strings.Index(right, "("); i >= 0 {
			right = right[:i]
		}
		r := importRule{from: splitList(left), to: splitList(right)}
		r.any = strings.TrimSpace(right) == "anything below"
		rules = append(rules, r)
	}
	if len(rules) < 10 {
		t.Fatalf("read %d rules from design.md's import table", len(rules))
	}
	return rules
}

// matchAny reports whether pkg matches one of the patterns ("x/*": a package
// below x, at any depth).
func matchAny(patterns []string, pkg string) bool {
	for _, p := range patterns {
		if below, ok := strings.CutSuffix(p, "*"); ok && strings.HasSuffix(below, "/") && strings.HasPrefix(pkg, below) {
			return true
		}
		if p == pkg {
			return true
		}
	}
	return false
}

// Every import between the module's packages is one design.md's table
// allows: the first line whose left side names the importer decides.
func TestDesignImports(t *testing.T) {
	rules := importRules(t)
	for p, imports := range packages(t) {
		var rule *importRule
		for i := range rules {
			if matchAny(rules[i].from, p) {
				rule = &rules[i]
				break
			}
		}
		if rule == nil {
			t.Errorf("package %s has no line in design.md's import table", p)
			continue
		}
		for _, imp := range imports {
			if !rule.any && !matchAny(rule.to, imp) {
				t.Errorf("%s imports %s, which design.md's import table does not allow", p, imp)
			}
		}
	}
}
