package helmrelease

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, body := range files {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPackage: the same sources give the same bytes whatever the files' times and
// modes, .helmignore is honoured, and a directory that is not a chart is refused.
func TestPackage(t *testing.T) {
	files := map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: pk\nversion: 1.2.3\n",
		"values.yaml":         "greeting: hi\n",
		"templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: pk}\ndata: {g: {{ .Values.greeting | quote }}}\n",
		".helmignore":         "notes.txt\n",
		"notes.txt":           "not packed\n",
		"templates/_help.tpl": "{{- define \"x\" }}x{{ end }}\n",
	}
	a, b := t.TempDir(), t.TempDir()
	writeTree(t, a, files)
	writeTree(t, b, files)
	old := time.Date(2011, 3, 4, 5, 6, 7, 0, time.UTC)
	if err := errors.Join(os.Chtimes(filepath.Join(b, "values.yaml"), old, old), os.Chmod(filepath.Join(b, "Chart.yaml"), 0o644)); err != nil {
		t.Fatal(err)
	}
	da, ca, err := Package(a)
	if err != nil {
		t.Fatal(err)
	}
	db, cb, err := Package(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(da, db) || ca.Digest != cb.Digest {
		t.Errorf("the same sources packed to different archives (%s, %s)", ca.Digest, cb.Digest)
	}
	if ArchiveName(ca) != "pk-1.2.3.tgz" {
		t.Errorf("archive name %s", ArchiveName(ca))
	}
	for _, f := range mustChart(t, da).chart.Raw {
		if f.Name == "notes.txt" {
			t.Error(".helmignore'd notes.txt is in the archive")
		}
	}
	if _, _, err := Package(t.TempDir()); !errors.Is(err, ErrChart) {
		t.Errorf("empty directory: %v, want ErrChart", err)
	}
}
