package rrl

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// layers is the order of the package's files, bottom first, that doc.go
// describes: a file may refer to names defined in its own file and in
// those before it, never to one defined in a file after it.
var layers = []string{
	// The vocabulary: the types of the API, the clock, the keys.
	"doc.go", "action.go", "tuple.go", "limitkind.go", "event.go", "clock.go", "key.go",
	// The settings.
	"values.go", "suggest.go", "config.go", "stats.go",
	// The store, and the arithmetic on what it stores.
	"table.go", "balance.go",
	// Accounts: the two above joined, and counted.
	"stripes.go", "accounts.go",
	// The allowances in the accounts' units, and their scaling.
	"allowances.go", "qps.go", "record.go", "watch.go",
	// The RRL and its features.
	"rrl.go", "charge.go", "prefixes.go", "sent.go", "streamtime.go", "limited.go", "top.go", "debit.go",
}

// TestLayers checks that no file of the package refers to a name (a
// package-level name, a method or a field) defined in a file above it in
// layers, and that layers names every file. It type-checks the package's
// files with go/types and, for every identifier that Info.Uses resolves to
// an object of this package declared in another file, compares the two
// files' places in layers. Run with -v to see the references counted.
func TestLayers(t *testing.T) {
	up, err := upwardReferences(".", layers)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range up {
		t.Logf("%s", u)
	}
	if len(up) > 0 {
		t.Errorf("%d references run up the layers (see layers in layers_test.go)", len(up))
	}
}

// upwardReferences returns, for the package in dir, a line for each
// reference from a file to a name defined in a file later in order.
func upwardReferences(dir string, order []string) ([]string, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		if !slices.Contains(order, filepath.Base(name)) {
			return nil, fmt.Errorf("%s is not in the layers", filepath.Base(name))
		}
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, filepath.Base(name), src, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("github.com/dnsrrl/rrl", fset, files, info)
	if err != nil {
		return nil, err
	}
	place := func(pos token.Pos) int { return slices.Index(order, fset.Position(pos).Filename) }
	seen := map[string]bool{}
	var up []string
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		if v, ok := obj.(*types.Var); ok && !v.IsField() && obj.Parent() != pkg.Scope() {
			continue // a local variable
		}
		if obj.Parent() != nil && obj.Parent() != pkg.Scope() && obj.Parent() != types.Universe {
			continue // declared in a function
		}
		from, to := place(id.Pos()), place(obj.Pos())
		if to > from {
			line := fmt.Sprintf("%s refers to %s of %s", order[from], obj.Name(), order[to])
			if !seen[line] {
				seen[line] = true
				up = append(up, line)
			}
		}
	}
	sort.Strings(up)
	return up, nil
}
