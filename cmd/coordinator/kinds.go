package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/plinth-dev/plinth/pkg/stepkind"
)

// stepKindTable is `get kinds`: one line per step kind of pkg/stepkind (what each
// waits for and needs: describe kind, -o yaml, docs/steps.md).
func stepKindTable(tw *tabwriter.Writer, kinds []stepkind.Kind) {
	fmt.Fprintln(tw, "KIND\tAREA\tINPUTS\tDRIVER\tPROGRAM\tDOES")
	for _, k := range kinds {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", kindName(k), k.Area, k.InputsType(), k.DriverPackage, k.RunsIn(), k.Does)
	}
}

func kindName(k stepkind.Kind) string {
	if k.PerObject != "" {
		return k.Name + "/<" + k.PerObject + ">"
	}
	return k.Name
}

// describeStepKind is `describe kind KIND`: one row of the table, field by field.
func describeStepKind(g *globals, w io.Writer, name string) error {
	k, ok := stepkind.Lookup(strings.TrimSuffix(name, "/"))
	if !ok {
		if i := strings.Index(name, "/"); i > 0 {
			k, ok = stepkind.Lookup(name[:i]) // ceph.pool/volumes names its kind too
		}
	}
	if !ok {
		return fmt.Errorf("describe kind: %q is not a step kind; the kinds are %s (plinth-coordinator get kinds)", name, strings.Join(stepkind.Names(), ", "))
	}
	return g.emit(w, k, func(tw *tabwriter.Writer) {
		fmt.Fprintf(tw, "Kind:\t%s\nArea:\t%s\nInputs:\t%s\nDoes:\t%s\nWaits for:\t%s\nHost must offer:\t%s\nDriver:\t%s %s\nRuns in:\t%s\n",
			kindName(k), k.Area, k.InputsType(), k.Does, dash(k.WaitsFor), dash(k.Needs), k.DriverPackage, k.Constructor, k.RunsIn())
	})
}
