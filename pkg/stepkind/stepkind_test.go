package stepkind

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/driverexec"
)

// TestDocIsCurrent fails when docs/steps.md differs from the table.
func TestDocIsCurrent(t *testing.T) {
	p := filepath.Join("..", "..", DocFile)
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, Markdown()) {
		t.Errorf("%s is stale: run go generate ./pkg/stepkind", p)
	}
}

// TestTable checks what every row must hold: a dotted name used once, a contract
// struct from its area's spec package, words and a driver.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range All() {
		if seen[k.Name] {
			t.Errorf("%s: listed twice", k.Name)
		}
		seen[k.Name] = true
		if !strings.Contains(k.Name, ".") {
			t.Errorf("%s: kind names are dotted (<area>.<what>)", k.Name)
		}
		if k.Inputs == nil || k.Inputs.Kind() != reflect.Struct {
			t.Errorf("%s: inputs %v is not a struct", k.Name, k.Inputs)
		} else if !strings.HasSuffix(k.Inputs.PkgPath(), "spec") {
			t.Errorf("%s: inputs %v come from %s, not a contract package (pkg/<area>/<area>spec)", k.Name, k.Inputs, k.Inputs.PkgPath())
		}
		if k.Area == "" || k.Does == "" || k.DriverPackage == "" || k.Constructor == "" {
			t.Errorf("%s: area, does, driver package and constructor are required: %+v", k.Name, k)
		}
	}
}

// TestCheck: each program is checked against its own kinds; together the programs
// run every kind once.
func TestCheck(t *testing.T) {
	byProgram := map[string][]string{}
	for _, k := range All() {
		byProgram[k.RunsIn()] = append(byProgram[k.RunsIn()], k.Name)
	}
	if got := slices.Sorted(maps.Keys(byProgram)); !slices.Equal(got, slices.Sorted(slices.Values(driverexec.Programs()))) {
		t.Fatalf("the table's kinds run in %v; the drivers programs are %v", got, driverexec.Programs())
	}
	if ceph := byProgram[driverexec.CephBinary]; !slices.Contains(ceph, "ceph.pool") || slices.Contains(ceph, "host.network") {
		t.Fatalf("%s runs %v", driverexec.CephBinary, ceph)
	}
	for prog, names := range byProgram {
		if err := Check(prog, names); err != nil {
			t.Fatal(err)
		}
	}
	plain := byProgram[driverexec.Binary]
	err := Check(driverexec.Binary, append(plain[1:], "host.teleport", "ceph.pool"))
	if err == nil || !strings.Contains(err.Error(), "no driver for host.network") || !strings.Contains(err.Error(), "host.teleport (not in the table)") || !strings.Contains(err.Error(), "ceph.pool (runs in plinth-drivers-ceph)") {
		t.Fatalf("Check = %v, want the missing kind, the unknown one and the other program's named", err)
	}
}

func TestCheckInputs(t *testing.T) {
	for _, k := range All() {
		if err := CheckInputs(k.Name, reflect.New(k.Inputs).Elem().Interface()); err != nil {
			t.Error(err)
		}
	}
	if err := CheckInputs("host.network", struct{}{}); err == nil || !strings.Contains(err.Error(), "hostspec.NetworkInputs") {
		t.Errorf("wrong type: %v", err)
	}
	if err := CheckInputs("host.teleport", struct{}{}); err == nil || !strings.Contains(err.Error(), "host.network") {
		t.Errorf("unknown kind: %v", err)
	}
}

func TestJSON(t *testing.T) {
	if b, _ := json.Marshal(Kind{Name: "host.sysctl", Inputs: reflect.TypeFor[struct{}]()}); !strings.Contains(string(b), `"program":"plinth-drivers"`) {
		t.Errorf("a kind without Program: %s", b)
	}
	k, _ := Lookup("ceph.pool")
	b, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["inputs"] != "cephspec.PoolInputs" || m["name"] != "ceph.pool" || m["perObject"] != "pool" || m["program"] != driverexec.CephBinary {
		t.Errorf("JSON = %s", b)
	}
}
