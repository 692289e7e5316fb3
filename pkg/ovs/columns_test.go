package ovs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/ovs/model"
)

// A read selects only readColumns: every model field this package's code names
// (as x.Field, by name: a name shared with another type counts too) must have its
// column there, or the code would see it empty. And every column listed must exist.
func TestReadColumnsCoverUsedFields(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				used[sel.Sel.Name] = true
			}
			return true
		})
	}
	for table, typ := range map[string]reflect.Type{
		model.OpenvSwitchTable: reflect.TypeFor[model.OpenvSwitch](),
		model.BridgeTable:      reflect.TypeFor[model.Bridge](),
		model.PortTable:        reflect.TypeFor[model.Port](),
		model.InterfaceTable:   reflect.TypeFor[model.Interface](),
	} {
		cols := readColumns[table]
		all := map[string]bool{}
		for f := range typ.Fields() {
			col := f.Tag.Get("ovsdb")
			all[col] = true
			if used[f.Name] && !slices.Contains(cols, col) {
				t.Errorf("%s.%s is used but a read does not select %s.%s: add it to readColumns", typ.Name(), f.Name, table, col)
			}
		}
		for _, col := range cols {
			if !all[col] {
				t.Errorf("readColumns names %s.%s, which the model does not have", table, col)
			}
		}
	}
}
