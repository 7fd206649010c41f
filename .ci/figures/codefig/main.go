// codefig prints the AST/type-based code figures of a Go module tree.
//
//	codefig DIR
//
// Non-test files only (files named *_test.go are never loaded).
package main

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
)

var dir string

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: codefig DIR [figure...]  (figures: 1 2 3 4 5 6 7; default all)")
		os.Exit(2)
	}
	want := map[string]bool{}
	for _, a := range os.Args[2:] {
		want[a] = true
	}
	on := func(f string) bool { return len(want) == 0 || want[f] }
	var err error
	dir, err = filepath.Abs(os.Args[1])
	check(err)
	modPath := modulePath()

	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
			packages.NeedTypes | packages.NeedTypesInfo,
		Dir:   dir,
		Tests: false,
	}
	if !on("1") && !on("2") && !on("3") && !on("4") && !on("5") && !on("6") {
		largestFuncs(10) // needs no type information
		return
	}
	pkgs, err := packages.Load(cfg, "./mcp", "./mcp/client", "./resume")
	check(err)
	byPath := map[string]*packages.Package{}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			fmt.Fprintln(os.Stderr, "load:", e)
		}
		byPath[p.PkgPath] = p
	}
	mcp := byPath[modPath+"/mcp"]
	client := byPath[modPath+"/mcp/client"]
	resume := byPath[modPath+"/resume"]

	if on("1") {
		fmt.Println("-- typed (go/types): X.mu.Lock()/RLock() with X of type *call, package mcp")
		lockSites(mcp, []string{"call"})
	}
	if on("2") {
		structFields(mcp, "call")
	}
	if on("3") {
		fmt.Println("-- typed (go/types): X.mu.Lock()/RLock() with X of type *Client, package mcp/client")
		lockSites(client, []string{"Client"})
	}
	if on("4") {
		lockSites(resume, []string{"Request"})
		lockSites(resume, []string{"Engine"})
	}
	if on("5") {
		openWithC(mcp)
	}
	if on("6") {
		methodCounts(mcp, 5)
		methodCounts(client, 5)
	}
	if on("7") {
		largestFuncs(10)
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func modulePath() string {
	out, err := exec.Command("go", "list", "-C", dir, "-m").Output()
	check(err)
	return strings.TrimSpace(string(out))
}

func rel(fset *token.FileSet, p token.Pos) (string, int) {
	pos := fset.Position(p)
	r, _ := filepath.Rel(dir, pos.Filename)
	return r, pos.Line
}

// baseNamed returns the named type of t or *t, nil when it is none.
func baseNamed(t types.Type) *types.Named {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, _ := types.Unalias(t).(*types.Named)
	return n
}

func exprString(e ast.Expr) string { return types.ExprString(e) }

// lockSites counts calls X.mu.Lock() / X.mu.RLock() where X's type is one of
// the named types (or pointers to them) declared in p.
func lockSites(p *packages.Package, names []string) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	type site struct {
		file, fn, x, m string
		line           int
	}
	var sites []site
	for _, f := range p.Syntax {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				ce, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := ce.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Lock" && sel.Sel.Name != "RLock") {
					return true
				}
				mu, ok := sel.X.(*ast.SelectorExpr)
				if !ok || mu.Sel.Name != "mu" {
					return true
				}
				tv, ok := p.TypesInfo.Types[mu.X]
				if !ok {
					return true
				}
				nt := baseNamed(tv.Type)
				if nt == nil || nt.Obj().Pkg() != p.Types || !want[nt.Obj().Name()] {
					return true
				}
				file, line := rel(p.Fset, ce.Pos())
				sites = append(sites, site{file, funcName(fd), exprString(mu.X), sel.Sel.Name, line})
				return true
			})
		}
	}
	files := map[string]int{}
	vars := map[string]int{}
	methods := map[string]int{}
	for _, s := range sites {
		files[s.file]++
		vars[s.x+".mu."+s.m+"()"]++
		methods[s.m]++
	}
	fmt.Printf("%s.mu: %d lock sites (Lock %d, RLock %d) in %d files\n", strings.Join(names, "/"), len(sites), methods["Lock"], methods["RLock"], len(files))
	fmt.Printf("  by expression: %s\n", countList(vars))
	fmt.Printf("  by file: %s\n", countList(files))
	for _, s := range sites {
		fmt.Printf("    %s:%d %s  %s.mu.%s()\n", s.file, s.line, s.fn, s.x, s.m)
	}
}

// byCount returns m's keys, the highest count first, then by name.
func byCount(m map[string]int) []string {
	return slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(m[b]-m[a], strings.Compare(a, b)) })
}

func countList(m map[string]int) string {
	ks := byCount(m)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	star := ""
	if s, ok := t.(*ast.StarExpr); ok {
		star = "*"
		t = s.X
	}
	return fmt.Sprintf("(%s%s).%s", star, recvBase(t), fd.Name.Name)
}

func recvBase(t ast.Expr) string {
	switch x := t.(type) {
	case *ast.StarExpr:
		return recvBase(x.X)
	case *ast.Ident:
		return x.Name
	case *ast.IndexExpr:
		return recvBase(x.X)
	case *ast.IndexListExpr:
		return recvBase(x.X)
	}
	return "?"
}

// structFields prints the fields of the named struct type, how many are
// bool, and recurses into fields that hold (by value or embedding) a struct
// type declared in the same package.
func structFields(p *packages.Package, name string) {
	seen := map[string]bool{}
	var walk func(name, indent string)
	walk = func(name, indent string) {
		if seen[name] {
			return
		}
		seen[name] = true
		obj := p.Types.Scope().Lookup(name)
		if obj == nil {
			fmt.Printf("%stype %s: not found\n", indent, name)
			return
		}
		st, ok := obj.Type().Underlying().(*types.Struct)
		if !ok {
			fmt.Printf("%stype %s: not a struct\n", indent, name)
			return
		}
		file, line := rel(p.Fset, obj.Pos())
		var bools, embedded []string
		var held []string
		for i := 0; i < st.NumFields(); i++ {
			f := st.Field(i)
			if b, ok := f.Type().(*types.Basic); ok && b.Kind() == types.Bool {
				bools = append(bools, f.Name())
			}
			if f.Embedded() {
				embedded = append(embedded, f.Name())
			}
			if n, ok := types.Unalias(f.Type()).(*types.Named); ok && n.Obj().Pkg() == p.Types {
				if _, isStruct := n.Underlying().(*types.Struct); isStruct {
					held = append(held, f.Name()+" "+n.Obj().Name())
				}
			}
		}
		fmt.Printf("%stype %s struct (%s:%d): %d fields, %d bool (%s); embedded: [%s]; held struct values of mcp: [%s]\n",
			indent, name, file, line, st.NumFields(), len(bools), strings.Join(bools, " "),
			strings.Join(embedded, " "), strings.Join(held, ", "))
		var names []string
		for i := 0; i < st.NumFields(); i++ {
			names = append(names, st.Field(i).Name())
		}
		fmt.Printf("%s  fields: %s\n", indent, strings.Join(names, " "))
		if decls, boolDecls := fieldDecls(p, name); decls > 0 {
			fmt.Printf("%s  as declarations (a line such as `a, b bool` once): %d, %d of them bool\n", indent, decls, boolDecls)
		}
		for i := 0; i < st.NumFields(); i++ {
			f := st.Field(i)
			if n, ok := types.Unalias(f.Type()).(*types.Named); ok && n.Obj().Pkg() == p.Types {
				if _, isStruct := n.Underlying().(*types.Struct); isStruct {
					walk(n.Obj().Name(), indent+"  ")
				}
			}
		}
	}
	walk(name, "")
}

func openWithC(p *packages.Package) {
	type hit struct {
		file, fn string
		line     int
	}
	var hits []hit
	byType := map[string]int{}
	for _, f := range p.Syntax {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || fd.Body == nil || len(fd.Body.List) == 0 {
				continue
			}
			rl := fd.Recv.List[0]
			if len(rl.Names) == 0 {
				continue
			}
			recv := rl.Names[0].Name
			as, ok := fd.Body.List[0].(*ast.AssignStmt)
			if !ok || as.Tok != token.DEFINE || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
				continue
			}
			if id, ok := as.Lhs[0].(*ast.Ident); !ok || id.Name != "c" {
				continue
			}
			sel, ok := as.Rhs[0].(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "c" {
				continue
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != recv {
				continue
			}
			file, line := rel(p.Fset, fd.Pos())
			hits = append(hits, hit{file, funcName(fd), line})
			byType[recvBase(rl.Type)]++
		}
	}
	fmt.Printf("%d methods open with `c := <recv>.c`; by receiver type: %s\n", len(hits), countList(byType))
	for _, h := range hits {
		fmt.Printf("    %s:%d %s\n", h.file, h.line, h.fn)
	}
}

func methodCounts(p *packages.Package, top int) {
	m := map[string]int{}
	for _, f := range p.Syntax {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
				continue
			}
			m[recvBase(fd.Recv.List[0].Type)]++
		}
	}
	ks := byCount(m)
	r, _ := filepath.Rel(dir, filepath.Dir(p.GoFiles[0]))
	fmt.Printf("%s/ (%d types with methods):", r, len(ks))
	for i, k := range ks {
		if i >= top {
			// print ties with the last one shown
			if m[k] != m[ks[top-1]] {
				break
			}
		}
		fmt.Printf(" %s %d,", k, m[k])
	}
	fmt.Println()
}

func largestFuncs(top int) {
	out, err := exec.Command("git", "-C", dir, "ls-files", "*.go").Output()
	check(err)
	fset := token.NewFileSet()
	type fn struct {
		file, name string
		lines      int
	}
	var fns []fn
	for _, name := range strings.Fields(string(out)) {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			fmt.Fprintln(os.Stderr, "parse:", err)
			continue
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			a := fset.Position(fd.Pos()).Line
			b := fset.Position(fd.End()).Line
			fns = append(fns, fn{name, funcName(fd), b - a + 1})
		}
	}
	sort.SliceStable(fns, func(i, j int) bool { return fns[i].lines > fns[j].lines })
	fmt.Printf("%d function declarations with a body in non-test files; lines from `func` to the closing brace (doc comment not counted):\n", len(fns))
	for i := 0; i < top && i < len(fns); i++ {
		fmt.Printf("  %4d  %s  %s\n", fns[i].lines, fns[i].file, fns[i].name)
	}
}

// fieldDecls counts the field declarations of the struct type name as
// written (`a, b bool` is one), and those of type bool.
func fieldDecls(p *packages.Package, name string) (decls, bools int) {
	for _, f := range p.Syntax {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != name {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false
			}
			for _, fl := range st.Fields.List {
				decls++
				if id, ok := fl.Type.(*ast.Ident); ok && id.Name == "bool" {
					bools++
				}
			}
			return false
		})
	}
	return decls, bools
}
