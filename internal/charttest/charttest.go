// Package charttest writes small Helm chart archives for tests, as `helm package`
// does: a gzipped tar with every file under NAME/, without the helm binary.
// Tests only: it calls t.Fatal.
package charttest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"sort"
	"testing"
)

// Archive packs files (path under the chart's directory → content).
func Archive(t testing.TB, name string, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		body := files[p]
		if err := tw.WriteHeader(&tar.Header{Name: name + "/" + p, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Demo is a chart named name whose ConfigMap needs .Values.greeting (default
// "hello") and carries .Values.port; extra adds or replaces files.
func Demo(t testing.TB, name string, extra map[string]string) []byte {
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n",
		"values.yaml": "greeting: hello\nport: 80\nnested:\n  a: 1\n  b: 2\n",
		"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-config}
data:
  greeting: {{ required "greeting is required" .Values.greeting | quote }}
  port: {{ .Values.port | quote }}
`,
	}
	for k, v := range extra {
		files[k] = v
	}
	return Archive(t, name, files)
}
