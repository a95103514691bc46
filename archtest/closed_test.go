package archtest

import (
	"go/ast"
	"go/constant"
	"go/types"
	"slices"
	"testing"

	"golang.org/x/tools/go/packages"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/policy"
)

// closedSet is a named string type whose values form a closed set.
type closedSet struct {
	pkg, name string
	members   []string // nil: the constants declared in pkg
}

// TestClosedSets type-checks the product code and fails on any value of a
// closed set that is not one of its members: a reason, event name or class
// written as a literal outside the set, a constant missing from Reasons()
// or EventNames(), or one converted from a string computed at runtime.
func TestClosedSets(t *testing.T) {
	sets := []closedSet{
		{pkg: module + "/policy", name: "Reason", members: stringsOf(policy.Reasons())},
		{pkg: module + "/audit", name: "EventName", members: stringsOf(audit.EventNames())},
		{pkg: module + "/dataplane", name: "Class"},
	}
	pkgs := loadModule(t)
	for _, set := range sets {
		members, named := set.resolve(t, pkgs)
		checked := 0
		for _, p := range pkgs {
			for _, f := range p.Syntax {
				ast.Inspect(f, func(n ast.Node) bool {
					if e, ok := n.(ast.Expr); ok && checkClosed(t, p, e, named, members) {
						checked++
					}
					return true
				})
			}
		}
		if checked == 0 {
			t.Errorf("%s.%s: no value of it found in the code; the check would pass vacuously", set.pkg, set.name)
		}
	}
}

// checkClosed reports whether e is a value of named, and flags it when it
// is a constant outside members or a conversion of a computed string.
func checkClosed(t *testing.T, p *packages.Package, e ast.Expr, named *types.Named, members []string) bool {
	tv, ok := p.TypesInfo.Types[e]
	if !ok || tv.IsType() || !types.Identical(tv.Type, named) {
		return false
	}
	pos := p.Fset.Position(e.Pos())
	if tv.Value != nil {
		// "" is the zero value: no reason or name yet, never emitted as one.
		if v := constant.StringVal(tv.Value); v != "" && !slices.Contains(members, v) {
			t.Errorf("%s: %s value %s is not in its closed set; add it there (with its constant) or use an existing one",
				pos, named.Obj().Name(), tv.Value)
		}
		return true
	}
	if call, ok := e.(*ast.CallExpr); ok && len(call.Args) == 1 {
		if ftv, ok := p.TypesInfo.Types[call.Fun]; ok && ftv.IsType() {
			if atv := p.TypesInfo.Types[call.Args[0]]; atv.Value == nil && !types.Identical(atv.Type, named) {
				t.Errorf("%s: a %s is converted from a string computed at runtime; use one of its constants",
					pos, named.Obj().Name())
			}
		}
	}
	return true
}

// resolve finds the named type and, when the set has no member list, the
// constants of that type declared in its package.
func (s closedSet) resolve(t *testing.T, pkgs []*packages.Package) ([]string, *types.Named) {
	t.Helper()
	for _, p := range pkgs {
		if p.PkgPath != s.pkg {
			continue
		}
		obj, ok := p.Types.Scope().Lookup(s.name).(*types.TypeName)
		if !ok {
			t.Fatalf("%s has no type %s", s.pkg, s.name)
		}
		named := obj.Type().(*types.Named)
		if s.members != nil {
			return s.members, named
		}
		var members []string
		for _, n := range p.Types.Scope().Names() {
			if c, ok := p.Types.Scope().Lookup(n).(*types.Const); ok && types.Identical(c.Type(), named) {
				members = append(members, constant.StringVal(c.Val()))
			}
		}
		return members, named
	}
	t.Fatalf("package %s not loaded", s.pkg)
	return nil, nil
}

// loadModule type-checks every package of the module, without tests.
func loadModule(t *testing.T) []*packages.Package {
	t.Helper()
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
		Dir:  "..",
	}
	pkgs, err := packages.Load(cfg, module+"/...")
	if err != nil {
		t.Fatalf("loading the module: %v", err)
	}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Fatalf("%s: %v", p.PkgPath, e)
		}
	}
	if len(pkgs) < 10 {
		t.Fatalf("loaded only %d packages", len(pkgs))
	}
	return pkgs
}

func stringsOf[S ~string](xs []S) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}
