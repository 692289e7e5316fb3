// Command apps packages the example applications' charts: for every application
// directory (default: each examples/apps/*/ with a charts/ directory) it packs
// charts/NAME/ into NAME-VERSION.tgz next to the application's file, where
// `plinth-coordinator app upload -f` finds the archives its sources name.
//
// Packing is deterministic (helmrelease.Package): the same sources give the same
// bytes, so a re-run rewrites nothing and the releases' chart digests do not move.
// The archives are build output (gitignored); `make demo-charts` runs this.
//
//	go run ./examples/apps [-check] [APP_DIR...]
//
// -check writes nothing and fails if an archive is missing or out of date.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/plinth-dev/plinth/pkg/helmrelease"
)

func main() {
	check := flag.Bool("check", false, "write nothing; fail if an archive is missing or differs from its sources")
	flag.Parse()
	if err := run(*check, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "apps:", err)
		os.Exit(1)
	}
}

func run(check bool, dirs []string) error {
	if len(dirs) == 0 {
		found, err := filepath.Glob(filepath.Join("examples", "apps", "*", "charts"))
		if err != nil {
			return err
		}
		for _, c := range found {
			dirs = append(dirs, filepath.Dir(c))
		}
		if len(dirs) == 0 {
			return errors.New("no examples/apps/*/charts here: run from the repository's root or name application directories")
		}
	}
	var stale []string
	for _, dir := range dirs {
		archives, err := Archives(dir)
		if err != nil {
			return err
		}
		for _, a := range archives {
			p := filepath.Join(dir, a.Name)
			old, err := os.ReadFile(p)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			switch {
			case bytes.Equal(old, a.Data):
				fmt.Printf("%s: up to date (sha256 %s)\n", p, a.Chart.Digest[:16])
			case check:
				stale = append(stale, p)
			default:
				if err := os.WriteFile(p, a.Data, 0o644); err != nil {
					return err
				}
				fmt.Printf("%s: written, %d bytes (sha256 %s)\n", p, len(a.Data), a.Chart.Digest[:16])
			}
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("missing or out of date: %v (run `make demo-charts`)", stale)
	}
	return nil
}

// Archive is one packed chart of an application.
type Archive struct {
	Name  string // NAME-VERSION.tgz
	Data  []byte
	Chart *helmrelease.Chart
}

// Archives packs every chart under dir/charts/, in name order.
func Archives(dir string) ([]Archive, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "charts"))
	if err != nil {
		return nil, fmt.Errorf("application %s: %w", dir, err)
	}
	var out []Archive
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		data, c, err := helmrelease.Package(filepath.Join(dir, "charts", e.Name()))
		if err != nil {
			return nil, err
		}
		if c.Name != e.Name() {
			return nil, fmt.Errorf("application %s: charts/%s holds chart %q: name the directory after the chart", dir, e.Name(), c.Name)
		}
		out = append(out, Archive{Name: helmrelease.ArchiveName(c), Data: data, Chart: c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
