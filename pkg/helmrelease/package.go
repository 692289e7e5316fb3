package helmrelease

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"path"
	"sort"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// archiveTime is every entry's modification time in a Package archive: a fixed
// time, so that the same chart sources give the same bytes (and so the same chart
// digest, which Apply compares) on every machine and every run.
var archiveTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Package packs a chart directory as a chart archive, deterministically: Helm's
// loader reads the directory (honouring .helmignore), and the files are written
// sorted, under NAME/, with fixed times, modes and owners, unlike `helm package`,
// which stamps the files' mtimes. The archive is checked with LoadChart; ArchiveName
// is its conventional file name.
func Package(dir string) ([]byte, *Chart, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("helmrelease: package %s: %w: %v", dir, ErrChart, err)
	}
	files := ch.Raw
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf) // the gzip header carries no name and no time
	tw := tar.NewWriter(zw)
	for _, f := range files {
		h := &tar.Header{Name: path.Join(ch.Name(), f.Name), Mode: 0o644, Size: int64(len(f.Data)),
			Typeflag: tar.TypeReg, ModTime: archiveTime}
		if err := tw.WriteHeader(h); err != nil {
			return nil, nil, fmt.Errorf("helmrelease: package %s: %s: %w", dir, f.Name, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, nil, fmt.Errorf("helmrelease: package %s: %s: %w", dir, f.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, nil, fmt.Errorf("helmrelease: package %s: %w", dir, err)
	}
	if err := zw.Close(); err != nil {
		return nil, nil, fmt.Errorf("helmrelease: package %s: %w", dir, err)
	}
	c, err := LoadChart(buf.Bytes())
	if err != nil {
		return nil, nil, fmt.Errorf("helmrelease: package %s: %w", dir, err)
	}
	return buf.Bytes(), c, nil
}

// ArchiveName is the file name `helm package` gives a chart's archive:
// NAME-VERSION.tgz.
func ArchiveName(c *Chart) string { return c.Name + "-" + c.Version + ".tgz" }
