package client

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// ReadAppUpload reads an Application file and the chart archives its charts name
// (source.archive, relative to the file's directory) into an upload, refusing
// locally what the coordinators would refuse for size or a missing file.
func ReadAppUpload(file string) (wire.AppUpload, error) {
	doc, err := os.ReadFile(file)
	if err != nil {
		return wire.AppUpload{}, fmt.Errorf("read %s: %w", file, err)
	}
	m, err := api.Decode(file, doc)
	if err != nil {
		return wire.AppUpload{}, err
	}
	up := wire.AppUpload{File: file, Document: doc}
	total := len(doc)
	seen := map[string]bool{}
	for _, app := range m.Applications {
		for _, g := range app.Spec.Groups {
			for _, c := range g.Charts {
				name := c.Source.Archive
				if name == "" || seen[name] {
					continue
				}
				seen[name] = true
				p := name
				if !filepath.IsAbs(p) {
					p = filepath.Join(filepath.Dir(file), name)
				}
				field := fmt.Sprintf("%s: applications[%s].spec.groups[%s].charts[%s].source.archive", file, app.Metadata.Name, g.Name, c.Name)
				fi, err := os.Stat(p)
				if err != nil {
					return wire.AppUpload{}, fmt.Errorf("%s: %w (archives are read relative to the application file's directory)", field, err)
				}
				if fi.Size() > api.MaxChartArchiveBytes {
					return wire.AppUpload{}, fmt.Errorf("%s: %s is %d bytes; a chart archive may be at most %d bytes (%d MiB)", field, p, fi.Size(), api.MaxChartArchiveBytes, api.MaxChartArchiveBytes>>20)
				}
				data, err := os.ReadFile(p)
				if err != nil {
					return wire.AppUpload{}, fmt.Errorf("%s: %w", field, err)
				}
				total += len(data)
				up.Archives = append(up.Archives, wire.AppArchive{Name: name, Data: data})
			}
		}
	}
	if total > api.MaxUploadBytes {
		return wire.AppUpload{}, fmt.Errorf("%s: the application and its archives are %d bytes; an upload may be at most %d bytes (%d MiB)", file, total, api.MaxUploadBytes, api.MaxUploadBytes>>20)
	}
	return up, nil
}
