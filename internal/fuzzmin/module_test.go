package fuzzmin

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const importPath = "github.com/ccrelay/ccrelay/internal/fuzzmin"

// fuzzPackage is what the test files of one directory hold.
type fuzzPackage struct {
	fuzz  []string // Fuzz* targets
	main  bool     // a TestMain that calls fuzzmin.Main
	check bool     // a test that calls fuzzmin.Check
}

// scanFuzzPackages parses the test files under root and returns, by
// directory, the fuzz targets and whether the package's TestMain sets the
// bound, for the directories that hold a fuzz target or call Main.
func scanFuzzPackages(t *testing.T, root string) map[string]*fuzzPackage {
	t.Helper()
	pkgs := map[string]*fuzzPackage{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		local := ""
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == importPath {
				local = "fuzzmin"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		p := pkgs[dir]
		if p == nil {
			p = &fuzzPackage{}
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil {
				continue
			}
			switch {
			case strings.HasPrefix(fn.Name.Name, "Fuzz") && takesF(fn):
				p.fuzz = append(p.fuzz, fn.Name.Name)
			case fn.Name.Name == "TestMain":
				p.main = p.main || (local != "" && calls(fn.Body, local, "Main"))
			}
			p.check = p.check || (local != "" && calls(fn.Body, local, "Check"))
		}
		if len(p.fuzz) > 0 || p.main || p.check {
			pkgs[dir] = p
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// takesF reports whether fn's only parameter is a *testing.F.
func takesF(fn *ast.FuncDecl) bool {
	ps := fn.Type.Params.List
	if len(ps) != 1 || len(ps[0].Names) > 1 {
		return false
	}
	star, ok := ps[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == "testing" && sel.Sel.Name == "F"
}

// calls reports whether body calls pkg.name.
func calls(body ast.Node, pkg, name string) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return !found
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == name {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == pkg {
				found = true
			}
		}
		return !found
	})
	return found
}

// Every package of the module with a fuzz target bounds its minimizing:
// its TestMain calls fuzzmin.Main and a test checks it (fuzzmin.Check).
// A new package's fuzz target without them would minimize each new input
// for the engine's default minute.
func TestEveryFuzzTargetBounded(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	pkgs := scanFuzzPackages(t, root)
	var dirs []string
	targets := 0
	for dir, p := range pkgs {
		if len(p.fuzz) > 0 {
			dirs = append(dirs, dir)
			targets += len(p.fuzz)
		}
	}
	sort.Strings(dirs)
	if len(dirs) < 2 || targets < 10 {
		t.Fatalf("found %d fuzz targets in %v: the scan misses them", targets, dirs)
	}
	for _, dir := range dirs {
		p := pkgs[dir]
		if !p.main {
			t.Errorf("%s: fuzz targets %v, but no TestMain calling fuzzmin.Main", dir, p.fuzz)
		}
		if !p.check {
			t.Errorf("%s: fuzz targets %v, but no test calling fuzzmin.Check", dir, p.fuzz)
		}
	}
	t.Logf("%d fuzz targets in %d packages: %v", targets, len(dirs), dirs)
}

// The scan finds a fuzz target and tells a package that sets the bound
// from one that does not.
func TestScanFuzzPackages(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		path := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n")
	write("bare/x_test.go", "package bare\nimport \"testing\"\nfunc FuzzX(f *testing.F) {}\nfunc FuzzNot(t *testing.T) {}\n")
	write("bound/x_test.go", "package bound\nimport \"testing\"\nfunc FuzzY(f *testing.F) {}\n")
	write("bound/main_test.go", "package bound\nimport (\n\"os\"\n\"testing\"\nfm \""+importPath+"\"\n)\nfunc TestMain(m *testing.M) { os.Exit(fm.Main(m)) }\nfunc TestB(t *testing.T) { fm.Check(t) }\n")
	write("bound/testdata/y_test.go", "package y\nimport \"testing\"\nfunc FuzzZ(f *testing.F) {}\n")
	pkgs := scanFuzzPackages(t, root)
	if p := pkgs["bare"]; p == nil || len(p.fuzz) != 1 || p.fuzz[0] != "FuzzX" || p.main || p.check {
		t.Errorf("bare: %+v", p)
	}
	if p := pkgs["bound"]; p == nil || len(p.fuzz) != 1 || !p.main || !p.check {
		t.Errorf("bound: %+v", p)
	}
	if len(pkgs) != 2 {
		t.Errorf("packages %v, want bare and bound", pkgs)
	}
}
