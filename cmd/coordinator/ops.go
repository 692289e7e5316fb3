package main

import (
	"github.com/plinth-dev/plinth/pkg/output"

	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/server"
	"github.com/plinth-dev/plinth/pkg/state"
	"github.com/plinth-dev/plinth/pkg/stepkind"
	"github.com/plinth-dev/plinth/pkg/wire"
)

func (g *globals) client() (*client.Client, error) {
	c, err := client.FromIdentityFile(g.identity)
	if err != nil {
		return nil, fmt.Errorf("%w (set --identity or PLINTH_IDENTITY to the file written by init)", err)
	}
	return c, nil
}

// emit prints v in the -o format; table renders the table form.
func (g *globals) emit(w io.Writer, v any, table func(w *tabwriter.Writer)) error {
	return output.Emit(w, g.output, v, table)
}

func newApply(g *globals) *cobra.Command {
	var files []string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Apply a site manifest (Site and Host documents)",
		Long: `apply validates the manifest (every problem is reported with file, document and field
path), shows the plan, and stores it in the replicated state; agents pick up their steps.`,
		Example: `  plinth-coordinator apply -f site.yaml --dry-run
  plinth-coordinator apply -f site.yaml -f hosts.yaml
  cat site.yaml | plinth-coordinator apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return errors.New("-f FILE is required")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			for _, f := range files {
				var data []byte
				if f == "-" {
					data, err = io.ReadAll(cmd.InOrStdin())
					f = "<stdin>"
				} else {
					data, err = os.ReadFile(f)
				}
				if err != nil {
					return fmt.Errorf("read %s: %w", f, err)
				}
				// Validate locally first: the same rules the coordinator applies.
				m, err := api.Decode(f, data)
				if err != nil {
					return err
				}
				if len(m.Applications) > 0 {
					return fmt.Errorf("%s: Application documents are uploaded with `plinth-coordinator app upload -f FILE` (with their chart archives), not applied", f)
				}
				var resp wire.ApplyResponse
				if _, err := c.Do(cmd.Context(), "POST", wire.PathApply, wire.ApplyRequest{File: f, YAML: string(data), DryRun: dryRun}, &resp); err != nil {
					return err
				}
				title := "Applied " + f
				if dryRun {
					title = "Plan for " + f + " (dry run, nothing changed)"
				}
				if err := g.emit(cmd.OutOrStdout(), resp, func(w *tabwriter.Writer) {
					fmt.Fprintln(w, title+":")
					for _, l := range resp.Plan {
						fmt.Fprintln(w, "  "+l)
					}
				}); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "manifest file(s), or - for stdin")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "validate and print the plan without changing anything")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml")
	return cmd
}

func newGet(g *globals) *cobra.Command {
	var watch bool
	var host string
	cmd := &cobra.Command{
		Use:   "get " + strings.Join(getWords(), "|"),
		Short: "List objects",
		Example: `  plinth-coordinator get hosts
  plinth-coordinator get steps --host compute-0 -o yaml
  plinth-coordinator get site --watch
  plinth-coordinator get events --watch
  plinth-coordinator get kinds`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: getValidArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind := strings.TrimSuffix(args[0], "s")
			if kind == "kind" {
				// The step kind table is built in: no coordinator needed.
				return g.emit(cmd.OutOrStdout(), stepkind.All(), func(tw *tabwriter.Writer) { stepKindTable(tw, stepkind.All()) })
			}
			if _, ok := api.DocumentKindNamed(kind); !ok && !slices.Contains(otherGets, kind) {
				return fmt.Errorf("unknown kind %q: want %s", args[0], orList(getWords()))
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			return watchLoop(cmd.Context(), watch, func(index uint64) (uint64, error) {
				return g.getOnce(cmd.Context(), c, cmd.OutOrStdout(), kind, host, index, watch)
			})
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "keep printing as things change (blocking queries, no polling)")
	cmd.Flags().StringVar(&host, "host", "", "only this host's steps")
	return cmd
}

// otherGets are what `get` lists besides the document kinds (singular).
var otherGets = []string{"step", "event", "token"}

// getWords are the words `get` takes, as its usage and errors name them.
func getWords() []string {
	var out []string
	for _, k := range api.DocumentKinds() {
		out = append(out, k.Resource)
	}
	for _, o := range otherGets {
		out = append(out, o+"s")
	}
	return append(out, "kinds")
}

// getValidArgs are the completions of `get`: getWords and the plural of singleton kinds.
func getValidArgs() []string {
	var out []string
	for _, k := range api.DocumentKinds() {
		out = append(out, k.Resource)
		if k.Resource != k.Name+"s" {
			out = append(out, k.Name+"s")
		}
	}
	for _, o := range otherGets {
		out = append(out, o+"s")
	}
	return append(out, "kinds")
}

// orList joins words for a message: "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// watchLoop runs once, or forever with blocking queries when watch is set.
func watchLoop(ctx context.Context, watch bool, once func(index uint64) (uint64, error)) error {
	var idx uint64
	for {
		next, err := once(idx)
		if err != nil {
			if !watch || ctx.Err() != nil {
				return err
			}
			fmt.Fprintln(os.Stderr, "watch:", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			continue
		}
		if !watch {
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		idx = next
	}
}

func (g *globals) getOnce(ctx context.Context, c *client.Client, w io.Writer, kind, host string, index uint64, watch bool) (uint64, error) {
	wait := 5 * time.Minute
	if k, ok := api.DocumentKindNamed(kind); ok {
		get, ok := documentGets[k.Kind]
		if !ok {
			return 0, fmt.Errorf("get %s: this CLI cannot print %s documents", kind, k.Kind)
		}
		return get(g, ctx, c, w, client.Blocking(wire.DocumentPath(k), index, wait), index, watch)
	}
	switch kind {
	case "step":
		var steps []plan.Record
		path := wire.PathSteps
		if host != "" {
			path += "?host=" + host
		}
		idx, err := c.Do(ctx, "GET", client.Blocking(path, index, wait), nil, &steps)
		if err != nil || (watch && idx == index) {
			return idx, err
		}
		return idx, g.emit(w, steps, func(tw *tabwriter.Writer) { stepTable(tw, steps) })
	case "event":
		var evs []state.Event
		after := index
		// Events are followed by their own IDs, not the store's index.
		if _, err := c.Do(ctx, "GET", client.Blocking(fmt.Sprintf(wire.PathEvents+"?after=%d", after), max(index, 1), wait), nil, &evs); err != nil {
			return index, err
		}
		if len(evs) == 0 {
			return index, nil
		}
		return evs[len(evs)-1].ID, g.emit(w, evs, func(tw *tabwriter.Writer) {
			if index == 0 {
				fmt.Fprintln(tw, "TIME\tTYPE\tOBJECT\tREASON\tMESSAGE")
			}
			for _, e := range evs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Time.Local().Format("15:04:05"), e.Type, e.Object, e.Reason, e.Message)
			}
		})
	case "token":
		var ts []state.TokenRecord
		if _, err := c.Do(ctx, "GET", wire.PathTokens+"?consistent", nil, &ts); err != nil {
			return 0, err
		}
		return 0, g.emit(w, ts, func(tw *tabwriter.Writer) {
			fmt.Fprintln(tw, "ID\tNAME\tROLE\tEXPIRES\tUSED")
			for _, t := range ts {
				used := "-"
				if !t.UsedAt.IsZero() {
					used = t.UsedAt.Local().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Role, t.Expires.Local().Format(time.RFC3339), used)
			}
		})
	}
	return 0, nil
}

// documentGet prints `get` for one document kind from its collection path.
type documentGet func(g *globals, ctx context.Context, c *client.Client, w io.Writer, path string, index uint64, watch bool) (uint64, error)

// documentGets prints each document kind of api.DocumentKinds
// (TestEveryDocumentKindPrints keeps one per kind).
var documentGets = map[string]documentGet{
	api.KindSite:        getSite,
	api.KindHost:        getHosts,
	api.KindApplication: getApps,
}

func getHosts(g *globals, ctx context.Context, c *client.Client, w io.Writer, path string, index uint64, watch bool) (uint64, error) {
	var hs []state.HostRecord
	idx, err := c.Do(ctx, "GET", path, nil, &hs)
	if err != nil || (watch && idx == index) {
		return idx, err
	}
	return idx, g.emit(w, hs, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "NAME\tROLES\tADDRESS\tENROLLED\tREACHABLE\tREADY\tGEN\tMESSAGE")
		for _, h := range hs {
			ready := plan.Find(h.Host.Status.Conditions, api.ConditionReady)
			st, msg := "-", ""
			if ready != nil {
				st, msg = ready.Status, ready.Message
			}
			if !h.Declared {
				st, msg = "-", "enrolled but not in the manifest"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s\t%d\t%s\n", h.Name, strings.Join(h.Host.Spec.Roles, ","), h.Host.Spec.ManagementAddress, h.Enrolled, dash(h.Reachable), st, h.Host.Metadata.Generation, msg)
		}
	})
}

func getSite(g *globals, ctx context.Context, c *client.Client, w io.Writer, path string, index uint64, watch bool) (uint64, error) {
	var s *state.SiteRecord
	idx, err := c.Do(ctx, "GET", path, nil, &s)
	if err != nil || (watch && idx == index) {
		return idx, err
	}
	if s == nil {
		return idx, errors.New("no site has been applied yet: plinth-coordinator apply -f site.yaml")
	}
	return idx, g.emit(w, s.Site, func(tw *tabwriter.Writer) {
		fmt.Fprintf(tw, "SITE %s (generation %d, observed %d)\n", s.Site.Metadata.Name, s.Site.Metadata.Generation, s.Site.Status.ObservedGeneration)
		conditionTable(tw, s.Site.Status.Conditions)
	})
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func conditionTable(tw *tabwriter.Writer, cs []api.Condition) {
	fmt.Fprintln(tw, "CONDITION\tSTATUS\tREASON\tSINCE\tMESSAGE")
	for _, c := range cs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.LastTransitionTime.Local().Format("15:04:05"), c.Message)
	}
}

// certTable prints when each certificate expires, and how long that is from now.
func certTable(tw *tabwriter.Writer, certs []api.CertValidity, now time.Time) {
	if len(certs) == 0 {
		return
	}
	fmt.Fprintln(tw, "\nCertificates:")
	fmt.Fprintln(tw, "CERTIFICATE\tISSUED\tEXPIRES\tLEFT")
	for _, c := range certs {
		left := "expired"
		if d := c.NotAfter.Sub(now); d > 0 {
			left = humanDuration(d)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.NotBefore.Local().Format(time.RFC3339), c.NotAfter.Local().Format(time.RFC3339), left)
	}
}

// humanDuration is d in its largest useful unit: 400d, 5h, 42s.
func humanDuration(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	case d >= 2*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	case d >= 2*time.Minute:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	default:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
}

func stepTable(tw *tabwriter.Writer, steps []plan.Record) {
	fmt.Fprintln(tw, "STEP\tSTATE\tATTEMPTS\tINPUTS\tAPPLIED\tLAST")
	for _, s := range steps {
		last := ""
		if s.LastResult != nil {
			if s.LastResult.Error != "" {
				last = "error: " + s.LastResult.Error
			} else if len(s.LastResult.Changes) > 0 {
				last = strings.Join(s.LastResult.Changes, "; ")
			} else {
				last = "no changes needed"
			}
		}
		if len(s.Drift) > 0 {
			last = "drift: " + strings.Join(s.Drift, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", s.ID, s.State, s.Attempts, s.InputsHash, dash(s.AppliedHash), last)
	}
}

func newDescribe(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe " + strings.Join(describeWords(), "|") + " NAME",
		Short: "Show a host's spec, conditions, steps and events, or a step kind",
		Example: `  plinth-coordinator describe host compute-0
  plinth-coordinator describe kind ovs.dpdk`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "kind" {
				return describeStepKind(g, cmd.OutOrStdout(), args[1])
			}
			k, ok := api.DocumentKindNamed(args[0])
			if !ok || !k.Describe || k.Name != args[0] {
				return fmt.Errorf("describe: unknown kind %q: want %s", args[0], orList(describeWords()))
			}
			show, ok := documentDescribes[k.Kind]
			if !ok {
				return fmt.Errorf("describe %s: this CLI cannot print %s documents", args[0], k.Kind)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			return show(g, cmd.Context(), c, cmd.OutOrStdout(), wire.DocumentPath(k)+"/"+args[1])
		},
	}
}

// describeWords are the kinds `describe` takes: document kinds that can be
// described, and step kinds.
func describeWords() []string {
	var out []string
	for _, k := range api.DocumentKinds() {
		if k.Describe {
			out = append(out, k.Name)
		}
	}
	return append(out, "kind")
}

// documentDescribes prints `describe` for each document kind whose row says
// Describe (TestEveryDocumentKindPrints keeps them so).
var documentDescribes = map[string]func(g *globals, ctx context.Context, c *client.Client, w io.Writer, path string) error{
	api.KindSite:        describeSite,
	api.KindHost:        describeHost,
	api.KindApplication: describeApp,
}

func describeSite(g *globals, ctx context.Context, c *client.Client, w io.Writer, path string) error {
	var d state.SiteDetail
	if _, err := c.Do(ctx, "GET", path, nil, &d); err != nil {
		return err
	}
	return g.emit(w, d, func(tw *tabwriter.Writer) {
		s := d.Site.Site
		fmt.Fprintf(tw, "Name:\t%s\nControllers:\t%s\nWitness:\t%s\nGeneration:\t%d (observed %d)\n",
			s.Metadata.Name, strings.Join(s.Spec.Controllers, ","), dash(s.Spec.Witness), s.Metadata.Generation, s.Status.ObservedGeneration)
		fmt.Fprintln(tw, "\nConditions:")
		conditionTable(tw, s.Status.Conditions)
		certTable(tw, d.Certificates, time.Now())
		fmt.Fprintln(tw, "\nEvents:")
		evs := d.Events
		if len(evs) > 20 {
			evs = evs[len(evs)-20:]
		}
		for _, e := range evs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Time.Local().Format("15:04:05"), e.Type, e.Reason, e.Message)
		}
	})
}

func describeHost(g *globals, ctx context.Context, c *client.Client, w io.Writer, path string) error {
	var d server.HostDetail
	if _, err := c.Do(ctx, "GET", path, nil, &d); err != nil {
		return err
	}
	return g.emit(w, d, func(tw *tabwriter.Writer) {
		h := d.Host
		fmt.Fprintf(tw, "Name:\t%s\nRoles:\t%s\nManagement address:\t%s\nEnrolled:\t%v\nGeneration:\t%d (observed %d)\n",
			h.Name, strings.Join(h.Host.Spec.Roles, ","), h.Host.Spec.ManagementAddress, h.Enrolled, h.Host.Metadata.Generation, h.Host.Status.ObservedGeneration)
		if !h.FactsAt.IsZero() {
			fmt.Fprintf(tw, "Facts reported:\t%s (hash %s)\n", h.FactsAt.Local().Format(time.RFC3339), h.FactsHash)
		}
		fmt.Fprintln(tw, "\nConditions:")
		conditionTable(tw, h.Host.Status.Conditions)
		certTable(tw, d.Certificates, time.Now())
		fmt.Fprintln(tw, "\nSteps:")
		stepTable(tw, d.Steps)
		fmt.Fprintln(tw, "\nEvents:")
		evs := d.Events
		if len(evs) > 20 {
			evs = evs[len(evs)-20:]
		}
		for _, e := range evs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Time.Local().Format("15:04:05"), e.Type, e.Reason, e.Message)
		}
	})
}

func newNode(g *globals) *cobra.Command {
	node := &cobra.Command{Use: "node", Short: "Enrol hosts and coordinators"}
	var role string
	var ttl time.Duration
	enroll := &cobra.Command{
		Use:   "enroll NAME --role ROLE",
		Short: "Print a one-time join token for a host or coordinator",
		Long: `enroll creates a single-use token bound to NAME that expires after --ttl. Hosts use it with
'plinth-agent join'; controllers and witnesses with 'plinth-coordinator join'. Only a hash
of the token's secret is stored.`,
		Example: `  plinth-coordinator node enroll compute-0 --role worker
  plinth-coordinator node enroll c1 --role coordinator --ttl 15m
  plinth-coordinator node enroll w --role witness`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tokenRole := "agent"
			switch role {
			case "coordinator", "witness":
				tokenRole = "coordinator"
			case "controller", "worker", "storage", "host":
			default:
				return fmt.Errorf("--role: %q is not valid: want controller, worker, storage (hosts) or coordinator, witness", role)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			var resp wire.TokenResponse
			if _, err := c.Do(cmd.Context(), "POST", wire.PathTokens, wire.TokenRequest{Name: args[0], Role: tokenRole, TTL: ttl}, &resp); err != nil {
				return err
			}
			return g.emit(cmd.OutOrStdout(), resp, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, resp.Token)
				fmt.Fprintf(os.Stderr, "Token for %s %s, single use, expires %s.\n", tokenRole, resp.Name, resp.Expires.Local().Format(time.RFC3339))
				if tokenRole == "agent" {
					fmt.Fprintf(os.Stderr, "On the host: plinth-agent join --name %s --coordinator <join-addr> --token <token>\n", resp.Name)
				} else {
					fmt.Fprintf(os.Stderr, "On the machine: plinth-coordinator join --name %s --bind <ip> --coordinator <join-addr> --token <token>%s\n", resp.Name, map[bool]string{true: " --witness"}[role == "witness"])
				}
			})
		},
	}
	enroll.Flags().StringVar(&role, "role", "worker", "controller, worker, storage, coordinator or witness")
	enroll.Flags().DurationVar(&ttl, "ttl", time.Hour, "how long the token stays valid (at most 168h)")
	_ = enroll.RegisterFlagCompletionFunc("role", fixedCompletion("controller", "worker", "storage", "coordinator", "witness"))
	node.AddCommand(enroll)
	return node
}

func newRetry(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "retry STEP",
		Short:   "Retry a Failed or Blocked step with a fresh attempt budget",
		Example: `  plinth-coordinator retry compute-0/host.network`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if _, err := c.Do(cmd.Context(), "POST", wire.PathRetry, wire.RetryRequest{ID: args[0]}, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "step %s will run again\n", args[0])
			return nil
		},
	}
}

func newDelete(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "delete " + strings.Join(deleteWords(), "|") + " NAME",
		Short:   "Remove a host from the site",
		Example: `  plinth-coordinator delete host compute-3`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, ok := api.DocumentKindNamed(args[0])
			if !ok || !k.Delete || k.Name != args[0] {
				return fmt.Errorf("delete: unknown kind %q: want %s", args[0], orList(deleteWords()))
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if _, err := c.Do(cmd.Context(), "DELETE", wire.DocumentPath(k)+"/"+args[1], nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s deleted\n", k.Name, args[1])
			return nil
		},
	}
}

// deleteWords are the document kinds `delete` takes.
func deleteWords() []string {
	var out []string
	for _, k := range api.DocumentKinds() {
		if k.Delete {
			out = append(out, k.Name)
		}
	}
	return out
}

func newMembers(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "members",
		Short:   "List the coordinators and who leads",
		Example: `  plinth-coordinator members -o json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var ms []wire.Member
			if _, err := c.Do(cmd.Context(), "GET", wire.PathMembers, nil, &ms); err != nil {
				return err
			}
			sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
			return g.emit(cmd.OutOrStdout(), ms, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tROLE\tRAFT\tAPI\tSUFFRAGE\tLEADER")
				for _, m := range ms {
					role := "controller"
					if m.Witness {
						role = "witness"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\n", m.Name, role, m.RaftAddr, m.APIAddr, m.Suffrage, m.Leader)
				}
			})
		},
	}
}

// download writes the body of GET path to file (0600), whole or not at all: it is
// written beside file and renamed over it only once complete.
func download(ctx context.Context, c *client.Client, path, file string) (uint64, error) {
	tmp := file + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	idx, err := c.Do(ctx, "GET", path, nil, io.Writer(f))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return 0, err
	}
	return idx, os.Rename(tmp, file)
}

func newSnapshot(g *globals) *cobra.Command {
	snap := &cobra.Command{Use: "snapshot", Short: "Save or restore the replicated state"}
	snap.AddCommand(&cobra.Command{
		Use:     "save FILE",
		Short:   "Write a consistent copy of the whole state to FILE",
		Example: `  plinth-coordinator snapshot save plinth-$(date +%F).json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			idx, err := download(cmd.Context(), c, wire.PathSnapshot+"?consistent", args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "saved state at index %d to %s\n", idx, args[0])
			return nil
		},
	})
	snap.AddCommand(&cobra.Command{
		Use:     "restore FILE",
		Short:   "Replace the whole state with a saved snapshot (replicated to every coordinator)",
		Example: `  plinth-coordinator snapshot restore plinth-2026-11-29.json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if _, err := c.Do(cmd.Context(), "POST", wire.PathSnapshot, data, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored state from %s\n", args[0])
			return nil
		},
	})
	return snap
}
