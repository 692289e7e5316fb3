package main

import (
	"log/slog"
	"reflect"
	"testing"

	"github.com/plinth-dev/plinth/pkg/hostprofile"
	"github.com/plinth-dev/plinth/pkg/stepkind"
)

// TestDriversMatchStepKinds: every kind in the step kind table has a driver, every
// driver a table entry, and each driver comes from the package the table names
// (constructing drivers touches nothing on the host).
func TestDriversMatchStepKinds(t *testing.T) {
	dir := t.TempDir()
	reg, err := registry(dir, hostprofile.Profile{}, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if err := stepkind.Check(reg.Kinds()); err != nil {
		t.Fatal(err)
	}
	const module = "github.com/plinth-dev/plinth/"
	for _, k := range stepkind.All() {
		d, ok := reg.Get(k.Name)
		if !ok {
			t.Errorf("%s: no driver", k.Name)
			continue
		}
		typ := reflect.TypeOf(d)
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if got := typ.PkgPath(); got != module+k.DriverPackage {
			t.Errorf("%s: driver %v comes from %s; the table says %s", k.Name, typ, got, k.DriverPackage)
		}
	}
}
