package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/state"
	"github.com/plinth-dev/plinth/pkg/wire"
)

func newApp(g *globals) *cobra.Command {
	app := &cobra.Command{
		Use:   "app",
		Short: "Upload, apply and inspect Applications (Helm charts in ordered groups)",
		Long: `An Application is a set of Helm charts installed in ordered groups on the site's
cluster by the leader coordinator (docs/applications.md). 'app upload' stores the
document and its chart archives; 'app apply' installs it; overrides layer chart
defaults, the application's values, the values Plinth generates from the site, and
the operator's own ('app override set').`,
		Example: `  plinth-coordinator app upload -f examples/apps/demo/application.yaml
  plinth-coordinator app apply demo --wait
  plinth-coordinator app status demo --watch`,
	}
	app.AddCommand(newAppUpload(g, false), newAppUpload(g, true), newAppApply(g), newAppRequest(g, "abort"), newAppRemove(g),
		newAppDelete(g), newAppList(g), newAppStatus(g), newAppHistory(g), newAppOverride(g), newAppOverrides(g))
	return app
}

// completeApps completes application names (first argument), then chart names of
// that application (second) when charts is set.
func (g *globals) completeApps(charts bool) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		c, err := g.client()
		if err != nil || len(args) > 1 || (len(args) == 1 && !charts) {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
		defer cancel()
		var out []string
		if len(args) == 0 {
			var apps []state.AppRecord
			if _, err := c.Do(ctx, "GET", wire.PathApps, nil, &apps); err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			for _, a := range apps {
				out = append(out, a.Name())
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		}
		var rec state.AppRecord
		if _, err := c.Do(ctx, "GET", wire.PathApp(args[0]), nil, &rec); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		for _, gr := range rec.Application.Spec.Groups {
			for _, ch := range gr.Charts {
				out = append(out, ch.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func newAppUpload(g *globals, update bool) *cobra.Command {
	var file string
	var dryRun bool
	verb, short, example := "upload", "Store an Application and its chart archives (nothing is installed yet)",
		`  plinth-coordinator app upload -f app.yaml --dry-run
  plinth-coordinator app upload -f app.yaml`
	if update {
		verb, short, example = "update", "Replace an uploaded Application; an applied one rolls out at once",
			`  plinth-coordinator app update -f app.yaml --dry-run
  plinth-coordinator app update -f app.yaml`
	}
	cmd := &cobra.Command{
		Use:   verb + " -f FILE",
		Short: short,
		Long: verb + ` reads FILE (one Application document) and every chart archive its charts name
in source.archive, relative to FILE's directory, and sends them to the coordinators,
which check the document, load each chart and render it with the values it will get.
Nothing is stored when any check fails.`,
		Example: example,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("-f FILE is required")
			}
			up, err := client.ReadAppUpload(file)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			path := wire.PathApps + fmt.Sprintf("?%s=%v&%s=%v", wire.QueryUpdate, update, wire.QueryDryRun, dryRun)
			var resp wire.AppUploadResponse
			if _, err := c.Do(cmd.Context(), "POST", path, up, &resp); err != nil {
				return err
			}
			title := map[bool]string{false: "Uploaded ", true: "Updated "}[update] + file
			if dryRun {
				title = "Plan for " + file + " (dry run, nothing changed)"
			}
			return g.emit(cmd.OutOrStdout(), resp, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, title+":")
				for _, l := range resp.Plan {
					fmt.Fprintln(w, "  "+l)
				}
			})
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "the Application file")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check and print what would change without changing anything")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml")
	return cmd
}

// appRequest posts a lifecycle request and returns the record as it stood after it.
func appRequest(ctx context.Context, c *client.Client, name, action string) (state.AppRecord, uint64, error) {
	if _, err := c.Do(ctx, "POST", wire.PathAppAction(name, action), nil, nil); err != nil {
		return state.AppRecord{}, 0, err
	}
	// Consistent: the next coordinator asked may not have applied the request yet.
	var rec state.AppRecord
	idx, err := c.Do(ctx, "GET", wire.PathApp(name)+"?consistent", nil, &rec)
	return rec, idx, err
}

func newAppApply(g *globals) *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:   "apply NAME",
		Short: "Install or upgrade an uploaded Application, group by group",
		Example: `  plinth-coordinator app apply demo
  plinth-coordinator app apply demo --wait`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeApps(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.appLifecycle(cmd, args[0], state.AppActionApply, wait, api.AppApplied, api.AppApplyFailed)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "print progress until the application is applied; exit non-zero if the apply fails")
	return cmd
}

func newAppRemove(g *globals) *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:   "remove NAME",
		Short: "Uninstall an Application's releases, last group first (the upload is kept)",
		Example: `  plinth-coordinator app remove demo --wait
  plinth-coordinator app delete demo`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeApps(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.appLifecycle(cmd, args[0], state.AppActionRemove, wait, api.AppUploaded, api.AppRemoveFailed)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "print progress until the releases are removed; exit non-zero if removal fails")
	return cmd
}

func newAppRequest(g *globals, action string) *cobra.Command {
	return &cobra.Command{
		Use:               action + " NAME",
		Short:             "Stop an Application's running apply or remove (it ends apply-failed or remove-failed)",
		Example:           `  plinth-coordinator app abort demo`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeApps(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.appLifecycle(cmd, args[0], action, false, "", "")
		},
	}
}

func newAppDelete(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:               "delete NAME",
		Short:             "Forget an uploaded Application that has no releases (remove it first)",
		Example:           `  plinth-coordinator app delete demo`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeApps(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if _, err := c.Do(cmd.Context(), "DELETE", wire.PathApp(args[0]), nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "application %s deleted\n", args[0])
			return nil
		},
	}
}

// appLifecycle sends a request; with wait, it follows the application with
// blocking queries, printing each new progress line, until it reaches done (nil)
// or failed (an error).
func (g *globals) appLifecycle(cmd *cobra.Command, name, action string, wait bool, done, failed string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	rec, idx, err := appRequest(ctx, c, name, action)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "application %s: %s requested (%s)\n", name, action, rec.Status.State)
	if !wait {
		return nil
	}
	last := ""
	for {
		line := progressLine(rec)
		if line != last {
			fmt.Fprintln(out, line)
			last = line
		}
		switch rec.Status.State {
		case done:
			return nil
		case failed:
			return fmt.Errorf("application %s is %s: %s (see `plinth-coordinator app status %s`)", name, failed, failure(rec), name)
		}
		var next *state.AppRecord
		n, err := c.Do(ctx, "GET", client.Blocking(wire.PathApp(name), idx, 5*time.Minute), nil, &next)
		if err != nil {
			return err
		}
		if next == nil {
			return fmt.Errorf("application %s was deleted", name)
		}
		rec, idx = *next, n
	}
}

// progressLine is one line of `--wait` output: the state, the progress and each
// chart's state.
func progressLine(r state.AppRecord) string {
	var charts []string
	for _, c := range r.Status.Charts {
		s := c.Chart + "=" + c.State
		if c.WaitingFor != "" {
			s += "(" + c.WaitingFor + ")"
		}
		charts = append(charts, s)
	}
	line := fmt.Sprintf("%s %s", time.Now().Format("15:04:05"), r.Status.State)
	if r.Status.Progress != "" {
		line += ": " + r.Status.Progress
	}
	if len(charts) > 0 {
		line += " [" + strings.Join(charts, " ") + "]"
	}
	return line
}

func failure(r state.AppRecord) string {
	for _, c := range r.Status.Conditions {
		if c.Status == "False" && c.Message != "" {
			return c.Message
		}
	}
	for _, c := range r.Status.Charts {
		if c.State == api.ChartFailed {
			return fmt.Sprintf("chart %s (release %s/%s): %s", c.Chart, c.Namespace, c.Release, c.Message)
		}
	}
	return dash(r.Status.Progress)
}

func newAppList(g *globals) *cobra.Command {
	var watch bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the uploaded Applications",
		Example: `  plinth-coordinator app list
  plinth-coordinator app list -o yaml --watch`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			return watchLoop(cmd.Context(), watch, func(index uint64) (uint64, error) {
				return getApps(g, cmd.Context(), c, cmd.OutOrStdout(), client.Blocking(wire.PathApps, index, 5*time.Minute), index, watch)
			})
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "keep printing as things change (blocking queries, no polling)")
	return cmd
}

// getApps prints the application table; `get applications` prints it too.
func getApps(g *globals, ctx context.Context, c *client.Client, w io.Writer, path string, index uint64, watch bool) (uint64, error) {
	var apps []state.AppRecord
	idx, err := c.Do(ctx, "GET", path, nil, &apps)
	if err != nil || (watch && idx == index) {
		return idx, err
	}
	return idx, g.emit(w, apps, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "NAME\tSTATE\tGENERATION\tCHARTS\tPROGRESS")
		for _, a := range apps {
			n, deployed := 0, 0
			for _, gr := range a.Application.Spec.Groups {
				n += len(gr.Charts)
			}
			for _, cs := range a.Status.Charts {
				if cs.State == api.ChartDeployed {
					deployed++
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%s\n", a.Name(), a.Status.State, a.Application.Metadata.Generation, deployed, n, dash(a.Status.Progress))
		}
	})
}

func newAppStatus(g *globals) *cobra.Command {
	var watch bool
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show an Application's charts (release, revision, state, what each waits for) and conditions",
		Example: `  plinth-coordinator app status demo
  plinth-coordinator app status demo --watch
  plinth-coordinator app status demo -o json`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeApps(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			return watchLoop(cmd.Context(), watch, func(index uint64) (uint64, error) {
				var rec *state.AppRecord
				idx, err := c.Do(cmd.Context(), "GET", client.Blocking(wire.PathApp(args[0]), index, 5*time.Minute), nil, &rec)
				if err != nil || (watch && idx == index) {
					return idx, err
				}
				if rec == nil {
					return idx, fmt.Errorf("application %s was deleted", args[0])
				}
				return idx, g.emit(cmd.OutOrStdout(), rec, func(tw *tabwriter.Writer) { appStatusTable(tw, *rec) })
			})
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "keep printing as things change (blocking queries, no polling)")
	return cmd
}

func appStatusTable(tw *tabwriter.Writer, r state.AppRecord) {
	st := r.Status
	fmt.Fprintf(tw, "APPLICATION %s: %s (generation %d, applying %d, observed %d)\n", r.Name(), st.State, r.Application.Metadata.Generation, st.Generation, st.ObservedGeneration)
	if st.Progress != "" {
		fmt.Fprintf(tw, "Progress:\t%s\n", st.Progress)
	}
	fmt.Fprintln(tw, "GROUP\tCHART\tRELEASE\tNAMESPACE\tREVISION\tSTATE\tWAITING-FOR/MESSAGE")
	rows := st.Charts
	if len(rows) == 0 {
		// Never applied: list the charts as declared.
		for _, gr := range r.Application.Spec.Groups {
			for _, c := range gr.Charts {
				rows = append(rows, api.ChartStatus{Group: gr.Name, Chart: c.Name, Release: c.Release, Namespace: c.Namespace, State: "-"})
			}
		}
	}
	for _, c := range rows {
		msg := c.WaitingFor
		if msg == "" {
			msg = c.Message
		}
		rev := "-"
		if c.Revision > 0 {
			rev = fmt.Sprint(c.Revision)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Group, c.Chart, c.Release, c.Namespace, rev, c.State, dash(msg))
	}
	if len(st.Conditions) > 0 {
		fmt.Fprintln(tw)
		conditionTable(tw, st.Conditions)
	}
}

func describeApp(g *globals, ctx context.Context, c *client.Client, w io.Writer, path string) error {
	var d state.AppDetail
	if _, err := c.Do(ctx, "GET", path, nil, &d); err != nil {
		return err
	}
	return g.emit(w, d, func(tw *tabwriter.Writer) {
		appStatusTable(tw, d.App)
		fmt.Fprintln(tw, "\nEvents:")
		evs := d.Events
		if len(evs) > 20 {
			evs = evs[len(evs)-20:]
		}
		for _, e := range evs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Time.Local().Format("15:04:05"), e.Type, e.Object, e.Reason, e.Message)
		}
	})
}

func newAppHistory(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "history NAME [CHART]",
		Short: "List the Helm revisions of an Application's releases, read from the cluster",
		Example: `  plinth-coordinator app history demo
  plinth-coordinator app history demo web -o yaml`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: g.completeApps(true),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			path := wire.PathAppHistory(args[0])
			if len(args) == 2 {
				path += "?chart=" + args[1]
			}
			var h wire.AppHistory
			if _, err := c.Do(cmd.Context(), "GET", path, nil, &h); err != nil {
				return err
			}
			return g.emit(cmd.OutOrStdout(), h, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "CHART\tRELEASE\tNAMESPACE\tREVISION\tUPDATED\tSTATE\tCHART-VERSION\tDESCRIPTION")
				for _, ch := range h.Charts {
					if ch.Error != "" {
						fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\t%s\n", ch.Chart, ch.Release, ch.Namespace, ch.Error)
					}
					if len(ch.Revisions) == 0 && ch.Error == "" {
						fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\tnot installed\t-\t-\n", ch.Chart, ch.Release, ch.Namespace)
					}
					for _, r := range ch.Revisions {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", ch.Chart, ch.Release, ch.Namespace, r.Revision, r.Updated.Local().Format(time.RFC3339), r.State, r.Chart, r.Description)
					}
				}
			})
		},
	}
}

func newAppOverride(g *globals) *cobra.Command {
	ov := &cobra.Command{Use: "override", Short: "Set or clear the operator's values for one chart of an Application",
		Example: `  plinth-coordinator app override set demo web -f web-overrides.yaml
  plinth-coordinator app override set demo web --clear`}
	var file string
	var clear bool
	set := &cobra.Command{
		Use:   "set APP CHART (-f values.yaml | --clear)",
		Short: "Set (replace) or clear a chart's user overrides, the top override layer",
		Long: `set stores values.yaml as the chart's user overrides, above the chart's defaults,
the application's values and the values Plinth generates. They must be a map, must
not hold plinth-secret: references (they are stored in plain text; name a
Kubernetes Secret instead), and the chart must still render with them. The next
'app apply' rolls them out.`,
		Example: `  plinth-coordinator app override set demo web -f web-overrides.yaml
  plinth-coordinator app override set demo web --clear
  plinth-coordinator app overrides show demo web`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: g.completeApps(true),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (file == "") == !clear {
				return errors.New("give either -f values.yaml or --clear")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			path := wire.PathAppOverrides(args[0], args[1])
			if clear {
				if _, err := c.Do(cmd.Context(), "DELETE", path, nil, nil); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "application %s chart %s: user overrides cleared; `app apply %s` rolls it out\n", args[0], args[1], args[0])
				return nil
			}
			var data []byte
			if file == "-" {
				data, err = io.ReadAll(cmd.InOrStdin())
			} else {
				data, err = os.ReadFile(file)
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", file, err)
			}
			if _, err := c.Do(cmd.Context(), "PUT", path, data, nil); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "application %s chart %s: user overrides set from %s; `app apply %s` rolls them out\n", args[0], args[1], file, args[0])
			return nil
		},
	}
	set.Flags().StringVarP(&file, "filename", "f", "", "values file (YAML or JSON), or - for stdin")
	set.Flags().BoolVar(&clear, "clear", false, "clear the chart's user overrides")
	_ = set.MarkFlagFilename("filename", "yaml", "yml", "json")
	ov.AddCommand(set)
	return ov
}

func newAppOverrides(g *globals) *cobra.Command {
	ov := &cobra.Command{Use: "overrides", Short: "Show the values a chart of an Application gets",
		Example: `  plinth-coordinator app overrides show demo web`}
	ov.AddCommand(&cobra.Command{
		Use:   "show APP CHART",
		Short: "Print a chart's merged values with the layer each key comes from",
		Long: `show prints the values the chart is installed with: its defaults, then the
application's values, the system overrides Plinth generates from the site, then the
user overrides; each leaf carries a '# origin' comment (chart, application, system,
user). Secrets never appear: generated keys and passwords reach the chart as
Kubernetes Secrets, which the values only name.`,
		Example: `  plinth-coordinator app overrides show demo web
  plinth-coordinator app overrides show demo web -o json`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: g.completeApps(true),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var ov wire.AppOverrides
			if _, err := c.Do(cmd.Context(), "GET", wire.PathAppOverrides(args[0], args[1]), nil, &ov); err != nil {
				return err
			}
			if g.output != "table" && g.output != "" {
				return g.emit(cmd.OutOrStdout(), ov, nil)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "# application %s chart %s: merged values, lowest layer first: chart, application, system, user\n", ov.App, ov.Chart)
			if ov.Note != "" {
				fmt.Fprintf(w, "# %s\n", ov.Note)
			}
			writeOriginYAML(w, ov.Values, ov.Origins, "", 0)
			return nil
		},
	})
	return ov
}

// writeOriginYAML writes values as block YAML, keys sorted, each leaf (a scalar or
// a list, written in flow style) followed by "# origin".
// plainKey is a mapping key YAML reads as the same string without quotes.
var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)

// yamlKey writes a key plainly when YAML would read it back unchanged (not
// true/false/null/yes/no and the like), else quoted.
func yamlKey(k string) string {
	switch strings.ToLower(k) {
	case "true", "false", "yes", "no", "on", "off", "null", "y", "n", "~":
	default:
		if plainKey.MatchString(k) {
			return k
		}
	}
	b, _ := json.Marshal(k)
	return string(b)
}

func writeOriginYAML(w io.Writer, v map[string]any, origins map[string]string, prefix string, depth int) {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	indent := strings.Repeat("  ", depth)
	for _, k := range keys {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		key := yamlKey(k)
		if m, ok := v[k].(map[string]any); ok && len(m) > 0 {
			fmt.Fprintf(w, "%s%s:\n", indent, key)
			writeOriginYAML(w, m, origins, p, depth+1)
			continue
		}
		val, err := json.Marshal(v[k])
		if err != nil {
			val = []byte(fmt.Sprintf("%q", fmt.Sprint(v[k])))
		}
		fmt.Fprintf(w, "%s%s: %s  # %s\n", indent, key, val, dash(origins[p]))
	}
}
