// Package output prints CLI results the way operators expect from kubectl-like
// tools: a table for people, YAML or JSON for scripts. Both Plinth binaries use it so
// their -o flags behave the same.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// Formats lists the values -o accepts.
var Formats = []string{"table", "yaml", "json"}

// Emit writes v as format; "table" (or "") calls table with a tab writer, which
// Emit flushes. A nil table makes "table" an error.
func Emit(w io.Writer, format string, v any, table func(w *tabwriter.Writer)) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "table", "":
		if table == nil {
			return fmt.Errorf("--output: table is not available here: want yaml or json")
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		table(tw)
		return tw.Flush()
	}
	return fmt.Errorf("--output: %q is not valid: want table, yaml or json", format)
}
