package state

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
)

// TestDeepCopySharesNothing: a copy of the tables holds the same records as the
// original and shares no map, slice or pointer with it (chart archives apart, which
// are immutable), and no type the tables hold keeps references in unexported
// fields, which deepCopy would share.
func TestDeepCopySharesNothing(t *testing.T) {
	l := newLog(t)
	l.must(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: manifest("c0", "w1")})
	enrolled(l, "c0")
	enrolled(l, "w1")
	st, _ := l.view().Step("w1/host.network")
	l.must(CmdStepStart, StepStart{ID: st.ID, Host: "w1", InputsHash: st.InputsHash})
	l.must(CmdStepResult, StepResult{ID: st.ID, Host: "w1", InputsHash: st.InputsHash, Result: driver.Result{Changes: []string{"mtu"}}})
	l.must(CmdAppUpload, upload("demo", "chart-bytes", false))
	l.must(CmdAppOverride, AppOverride{Name: "demo", Chart: "db", Values: json.RawMessage(`{"k":"v"}`)})

	c := cloneTables(l.s.t)
	a, _ := json.Marshal(l.s.t)
	b, _ := json.Marshal(c)
	if string(a) != string(b) {
		t.Fatalf("the copy differs:\n%s\n%s", a, b)
	}
	var sharesNothing func(path string, x, y reflect.Value)
	sharesNothing = func(path string, x, y reflect.Value) {
		switch x.Kind() {
		case reflect.Pointer:
			if x.IsNil() {
				return
			}
			if x.Pointer() == y.Pointer() {
				t.Errorf("%s: the copy shares a pointer", path)
			}
			sharesNothing(path, x.Elem(), y.Elem())
		case reflect.Map:
			if x.IsNil() {
				return
			}
			if x.Pointer() == y.Pointer() {
				t.Errorf("%s: the copy shares a map", path)
			}
			it := x.MapRange()
			for it.Next() {
				sharesNothing(path+"["+it.Key().String()+"]", it.Value(), y.MapIndex(it.Key()))
			}
		case reflect.Slice:
			if x.Cap() > 0 && x.Pointer() == y.Pointer() {
				t.Errorf("%s: the copy shares a slice", path)
			}
			for i := range x.Len() {
				sharesNothing(path, x.Index(i), y.Index(i))
			}
		case reflect.Interface:
			if !x.IsNil() {
				sharesNothing(path, x.Elem(), y.Elem())
			}
		case reflect.Struct:
			for i := range x.NumField() {
				if f := x.Type().Field(i); f.IsExported() && f.Name != "Archives" {
					sharesNothing(path+"."+f.Name, x.Field(i), y.Field(i))
				}
			}
		}
	}
	sharesNothing("tables", reflect.ValueOf(l.s.t).Elem(), reflect.ValueOf(c).Elem())
	if len(c.Apps) == 0 || len(c.Steps) == 0 || len(c.Events) == 0 {
		t.Fatalf("the state tried is too small: %d apps, %d steps, %d events", len(c.Apps), len(c.Steps), len(c.Events))
	}

	seen := map[reflect.Type]bool{}
	var noHiddenRefs func(path string, typ reflect.Type)
	noHiddenRefs = func(path string, typ reflect.Type) {
		if seen[typ] || typ == reflect.TypeFor[time.Time]() {
			return
		}
		seen[typ] = true
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			noHiddenRefs(path, typ.Elem())
		case reflect.Map:
			noHiddenRefs(path, typ.Key())
			noHiddenRefs(path, typ.Elem())
		case reflect.Struct:
			for i := range typ.NumField() {
				f := typ.Field(i)
				switch {
				case f.IsExported():
					noHiddenRefs(path+"."+f.Name, f.Type)
				case typ != reflect.TypeFor[tables]() && anyRefs(f.Type):
					t.Errorf("%s: %s.%s is unexported and holds references: a copy would share them", path, typ, f.Name)
				}
			}
		}
	}
	noHiddenRefs("tables", reflect.TypeFor[tables]())
}

// anyRefs is holdsRefs counting unexported fields too.
func anyRefs(typ reflect.Type) bool {
	switch typ.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return anyRefs(typ.Elem())
	case reflect.Struct:
		for i := range typ.NumField() {
			if anyRefs(typ.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// BenchmarkCloneTables1000: the copy an apply of a 1000-host site makes, twice
// (its dry run and the FSM's all-or-nothing run), against the snapshot encoding's
// round trip it replaced.
func BenchmarkCloneTables1000(b *testing.B) {
	l := benchSite(b, 1000)
	b.Run("deepcopy", func(b *testing.B) {
		for b.Loop() {
			cloneTables(l.s.t)
		}
	})
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			data, err := json.Marshal(struct {
				Version int     `json:"v"`
				Tables  *tables `json:"tables"`
			}{snapshotVersion, l.s.t})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := decodeSnapshot(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
