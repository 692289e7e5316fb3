// Command gen writes the manifest's JSON Schema files (pkg/api/schema): the copy
// editors use under docs/schema and the copy the CLI embeds. Run it through
// `go generate ./pkg/api/schema`.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/plinth-dev/plinth/pkg/api/schema"
)

func main() {
	apiDir := flag.String("api", "pkg/api", "directory of package api's sources (for doc comments)")
	embedDir := flag.String("embed", "pkg/api/schema", "directory of the copy the CLI embeds")
	docsDir := flag.String("docs", "docs/schema", "directory of the copy editors use")
	flag.Parse()
	if err := run(*apiDir, []string{*embedDir, *docsDir}); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(apiDir string, outDirs []string) error {
	files, err := schema.Generate(apiDir)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, dir := range outDirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		for _, n := range names {
			p := filepath.Join(dir, n)
			if err := os.WriteFile(p, files[n], 0o644); err != nil {
				return fmt.Errorf("write %s: %w", p, err)
			}
		}
	}
	return nil
}
