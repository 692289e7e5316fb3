package pki

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestIdentityFile(t *testing.T) {
	f := newTLSFixture(t)
	idf := NewIdentityFile([]string{"10.0.0.1:7443", "10.0.0.2:7443"}, f.admin)
	path := filepath.Join(t.TempDir(), "home", ".plinth", "identity.json")
	if err := idf.Write(path); err != nil {
		t.Fatal(err)
	}
	checkMode(t, path, 0o600)
	checkNoTemps(t, filepath.Dir(path))

	raw, _ := os.ReadFile(path)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m["coordinators"] == nil || m["ca"] == nil || m["cert"] == nil || m["key"] == nil {
		t.Errorf("file layout %v: %v", m, err)
	}
	got, err := ReadIdentityFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, idf) {
		t.Error("identity file changed in round trip")
	}
	if id, err := got.Bundle().Identity(); err != nil || id.Role != RoleAdmin || id.Name != "alice" {
		t.Errorf("identity %+v %v", id, err)
	}
	if _, err := got.Bundle().ClientTLS("10.0.0.1"); err != nil {
		t.Errorf("ClientTLS: %v", err)
	}
	for _, s := range []string{idf.String(), fmt.Sprintf("%v", idf), fmt.Sprintf("%#v", idf)} {
		if strings.Contains(s, "PRIVATE KEY") {
			t.Errorf("String leaks the key: %s", s)
		}
	}

	// Replacing keeps 0600.
	idf.Coordinators = idf.Coordinators[:1]
	if err := idf.Write(path); err != nil {
		t.Fatal(err)
	}
	checkMode(t, path, 0o600)

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadIdentityFile(path); err == nil || !strings.Contains(err.Error(), "permissions") {
		t.Errorf("0644 identity file: %v", err)
	}

	for name, bad := range map[string]IdentityFile{
		"no coordinators": NewIdentityFile(nil, f.admin),
		"empty address":   NewIdentityFile([]string{""}, f.admin),
		"no key":          {Coordinators: []string{"a:1"}, CA: idf.CA, Cert: idf.Cert},
	} {
		if err := bad.Write(filepath.Join(t.TempDir(), "id.json")); err == nil {
			t.Errorf("%s: written", name)
		}
	}
	garbage := filepath.Join(t.TempDir(), "garbage.json")
	os.WriteFile(garbage, []byte("coordinators: [x]"), 0o600)
	if _, err := ReadIdentityFile(garbage); err == nil {
		t.Error("garbage accepted")
	}
}
