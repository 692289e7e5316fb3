package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/plinth-dev/plinth/pkg/agent"
	"github.com/plinth-dev/plinth/pkg/host"
	out "github.com/plinth-dev/plinth/pkg/output"
)

func newStatus(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show this host's identity and steps",
		Long: `status prints the identity in --state-dir (host name, certificate expiry, coordinators,
results not yet reported) and asks the coordinators for this host's steps. Step inputs
are never printed: they may hold secrets.`,
		Example: `  plinth-agent status
  plinth-agent status -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := agent.GetStatus(cmd.Context(), g.stateDir)
			if err != nil {
				return err
			}
			if output == "table" {
				return statusTable(cmd.OutOrStdout(), st)
			}
			return out.Emit(cmd.OutOrStdout(), output, st, nil)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletion("table", "json", "yaml"))
	return cmd
}

func statusTable(w io.Writer, st agent.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Host:\t%s\n", st.Name)
	fmt.Fprintf(tw, "Certificate:\tserial %s, valid until %s (renews at %s)\n", st.Serial, st.NotAfter.Local().Format(time.RFC3339), st.RenewAt.Local().Format(time.RFC3339))
	fmt.Fprintf(tw, "Coordinators:\t%s\n", strings.Join(st.Coordinators, ", "))
	if len(st.PendingResults) > 0 {
		fmt.Fprintf(tw, "Unreported results:\t%s\n", strings.Join(st.PendingResults, ", "))
	}
	if st.StepsError != "" {
		fmt.Fprintf(tw, "Steps:\tunknown: %s\n", st.StepsError)
		return tw.Flush()
	}
	fmt.Fprintln(tw)
	if len(st.Steps) == 0 {
		fmt.Fprintln(tw, "No steps for this host yet.")
		return tw.Flush()
	}
	fmt.Fprintln(tw, "STEP\tKIND\tSTATE\tATTEMPTS\tINPUTS\tAPPLIED\tRETRY AT")
	for _, s := range st.Steps {
		retry := "-"
		if !s.RetryAt.IsZero() {
			retry = s.RetryAt.Local().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.ID, s.Kind, s.State, s.Attempts, s.InputsHash, dash(s.AppliedHash), retry)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newFacts() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "facts",
		Short: "Print the facts this agent reports about the host",
		Long: `facts gathers and prints what the agent reports to the coordinators: links, addresses,
routes, CPUs, NUMA nodes, memory and hugepages. It runs locally and contacts no
coordinator; network facts come from the network namespace it runs in.`,
		Example: `  plinth-agent facts
  plinth-agent facts -o yaml
  ip netns exec h1 plinth-agent facts`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := host.Gather(cmd.Context())
			if err != nil {
				return err
			}
			return out.Emit(cmd.OutOrStdout(), output, f, nil)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "json", "output format: json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletion("json", "yaml"))
	return cmd
}
