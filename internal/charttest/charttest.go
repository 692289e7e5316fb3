// Package charttest builds Helm chart archives in tests, byte for byte what
// `helm package` would produce for the same files, without the helm binary.
// Tests only: it calls t.Fatal.
package charttest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"sort"
	"testing"
)

// Archive packs files (path under the chart's directory → content) as a gzipped
// tar with every path under NAME/, in sorted order.
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
