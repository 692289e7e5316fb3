package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/api/schema"
)

// newExplain documents the manifest from the schema built into the binary, so it works
// offline, without a coordinator or an identity.
func newExplain(g *globals) *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "explain PATH",
		Short: "Describe the fields of the site manifest (Site, Host)",
		Long: `explain prints what a field of the site manifest is: its type, description, default,
allowed values and its fields, kubectl-explain style. PATH starts with a kind (site or
host) and follows field names; lists and maps are passed through, so
host.spec.interfaces.bond names the bond options of any interface. It reads the JSON
Schema built into this binary (docs/schema/ has the same files for editors) and needs
no coordinator.`,
		Example: `  plinth-coordinator explain site
  plinth-coordinator explain site.spec.kubernetes
  plinth-coordinator explain host.spec.interfaces --recursive
  plinth-coordinator explain site.spec.policy.drift
  plinth-coordinator explain site.spec.ceph -o json   # the schema fragment`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			docs, err := schema.Documents()
			if err != nil {
				return err
			}
			f, err := schema.Find(docs, args[0])
			if err != nil {
				return err
			}
			return g.emit(cmd.OutOrStdout(), f.Schema, func(tw *tabwriter.Writer) { explain(tw, f, recursive) })
		},
	}
	cmd.Flags().BoolVar(&recursive, "recursive", false, "print every field below PATH, not only its own fields")
	return cmd
}

// explain prints f: a header, its description, default and allowed values, then its
// fields (with one-line descriptions) or, recursive, the whole tree below it.
func explain(out io.Writer, f schema.Field, recursive bool) {
	var buf bytes.Buffer
	w := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	defer func() {
		_ = w.Flush()
		// Columns of empty cells (no default) leave trailing blanks.
		for _, l := range strings.SplitAfter(buf.String(), "\n") {
			fmt.Fprint(out, strings.TrimRight(l, " \n")+strings.Repeat("\n", strings.Count(l, "\n")))
		}
	}()
	s := f.Schema
	fmt.Fprintf(w, "KIND:\t%s\n", f.Document.Kind)
	fmt.Fprintf(w, "VERSION:\t%s\n", api.APIVersion)
	if f.Path != f.Document.Root {
		fmt.Fprintf(w, "FIELD:\t%s <%s>%s\n", f.Path, s.TypeName(), requiredMark(f.Required))
	}
	if s.Default != nil {
		fmt.Fprintf(w, "DEFAULT:\t%v\n", s.Default)
	}
	if vals := allowed(s); vals != "" {
		fmt.Fprintf(w, "VALUES:\t%s\n", vals)
	}
	if s.ReadOnly {
		fmt.Fprintf(w, "READ-ONLY:\tyes\n")
	}
	fmt.Fprintln(w, "\nDESCRIPTION:")
	desc := s.Description
	if desc == "" {
		desc = "<no description>"
	}
	for i, para := range strings.Split(desc, "\n\n") {
		if i > 0 {
			fmt.Fprintln(w)
		}
		for _, l := range wrap(para, 76) {
			fmt.Fprintln(w, "    "+l)
		}
	}
	if _, names := s.Children(); len(names) > 0 {
		fmt.Fprintln(w, "\nFIELDS:")
		fields(w, s, "  ", recursive)
	}
}

// fields lists the children of s, one line each: name, type and the first sentence
// of the description with the default; recursive descends into every object and
// leaves descriptions out, to show the shape.
func fields(w io.Writer, s *schema.Schema, indent string, recursive bool) {
	props, names := s.Children()
	parent := s.Object()
	for _, n := range names {
		c := props[n]
		def := ""
		if c.Default != nil {
			def = fmt.Sprintf("default %v", c.Default)
		}
		if recursive {
			fmt.Fprintf(w, "%s%s\t<%s>%s\t%s\n", indent, n, c.TypeName(), requiredMark(parent.IsRequired(n)), def)
			fields(w, c, indent+"  ", true)
			continue
		}
		line := summary(c.Description)
		if def != "" {
			line = strings.TrimSpace(line + " (" + def + ")")
		}
		fmt.Fprintf(w, "%s%s\t<%s>%s\t%s\n", indent, n, c.TypeName(), requiredMark(parent.IsRequired(n)), line)
	}
}

func requiredMark(required bool) string {
	if required {
		return " -required-"
	}
	return ""
}

// allowed renders a field's fixed set of values: its const, its enum, its items' or
// its keys'.
func allowed(s *schema.Schema) string {
	switch {
	case s.Const != "":
		return s.Const
	case len(s.Enum) > 0:
		return strings.Join(s.Enum, ", ")
	case s.Items != nil && len(s.Items.Enum) > 0:
		return strings.Join(s.Items.Enum, ", ") + " (each item)"
	case s.PropertyNames != nil && len(s.PropertyNames.Enum) > 0:
		return strings.Join(s.PropertyNames.Enum, ", ") + " (keys)"
	}
	return ""
}

// summary is the first sentence of a description, clipped to fit a line. A sentence
// ends at ". " outside parentheses and not after e.g. or i.e.
func summary(desc string) string {
	desc, _, _ = strings.Cut(desc, "\n\n")
	depth := 0
	for i := 0; i < len(desc)-1; i++ {
		switch desc[i] {
		case '(':
			depth++
		case ')':
			depth--
		case '.':
			if depth == 0 && desc[i+1] == ' ' && !strings.HasSuffix(desc[:i], "e.g") && !strings.HasSuffix(desc[:i], "i.e") {
				desc = desc[:i+1]
			}
		}
	}
	const max = 90
	if len(desc) > max {
		cut := strings.LastIndexByte(desc[:max], ' ')
		if cut <= 0 {
			cut = max
		}
		desc = desc[:cut] + " ..."
	}
	return desc
}

// wrap breaks text into lines of at most width characters at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// completePath completes a manifest path one element at a time: the kinds, then the
// fields of what has been typed so far. Objects end in "." so the next Tab continues.
func completePath(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	const directive = cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	docs, err := schema.Documents()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	parent, prefix, nested := cutLast(toComplete, ".")
	if !nested {
		var out []string
		for _, d := range docs {
			if strings.HasPrefix(d.Root, strings.ToLower(prefix)) {
				out = append(out, d.Root+".")
			}
		}
		return out, directive
	}
	f, err := schema.Find(docs, parent)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	props, names := f.Schema.Children()
	var out []string
	for _, n := range names {
		if !strings.HasPrefix(n, prefix) {
			continue
		}
		c := parent + "." + n
		if _, sub := props[n].Children(); len(sub) > 0 {
			c += "."
		}
		out = append(out, c+"\t"+summary(props[n].Description))
	}
	return out, directive
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return "", s, false
}
