// Command gen writes docs/steps.md from the step kind table (go generate ./pkg/stepkind).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/plinth-dev/plinth/pkg/atomicfile"
	"github.com/plinth-dev/plinth/pkg/stepkind"
)

func main() {
	out := flag.String("o", "../../"+stepkind.DocFile, "file to write")
	flag.Parse()
	if err := atomicfile.WriteFile(*out, stepkind.Markdown(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
