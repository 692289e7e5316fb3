package stepkind

import (
	"bytes"
	"fmt"
	"strings"
)

// DocFile is where Markdown's table is kept, from the module root.
const DocFile = "docs/steps.md"

// Markdown renders the table as docs/steps.md holds it (go generate ./pkg/stepkind;
// TestDocIsCurrent fails when the committed file is stale).
func Markdown() []byte {
	var b bytes.Buffer
	b.WriteString(`# Step kinds

<!-- Generated from pkg/stepkind by go generate ./pkg/stepkind; do not edit. -->

Every step a host runs has one of these kinds; its ID is ` + "`<host>/<kind>[/<object>]`" + `.
The planner renders the inputs (the contract type, from the area's
` + "`pkg/<area>/<area>spec`" + ` package), the agent's driver for the kind runs them
(observe, diff, apply, verify) in the drivers program the last column names. ` + "`plinth-coordinator get kinds`" + ` prints the same table
and ` + "`plinth-coordinator describe kind KIND`" + ` one row.

| kind | area | inputs | what it does | waits for | the host must offer | driver |
|---|---|---|---|---|---|---|
`)
	for _, k := range kinds {
		name := "`" + k.Name + "`"
		if k.PerObject != "" {
			name = "`" + k.Name + "/<" + k.PerObject + ">`"
		}
		fmt.Fprintf(&b, "| %s | %s | `%s` | %s | %s | %s | `%s` %s, in %s |\n",
			name, k.Area, k.InputsType(), cell(k.Does), cell(k.WaitsFor), cell(k.Needs), k.DriverPackage, k.Constructor, k.RunsIn())
	}
	return b.Bytes()
}

func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}
