// Command plinth-coordinator is both the coordinator daemon (serve) and the operator's
// CLI (init, join, apply, get, describe, node enroll, ...).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "plinth-coordinator",
		Short: "Plinth coordinator daemon and operator CLI",
		Long: `plinth-coordinator runs on the site's two HA controllers (and an optional witness),
keeping the declared site in Raft and handing each host's agent its steps. The same
binary is the operator's CLI: it talks to the coordinators over mTLS with the admin
identity written by 'init'.`,
		Example: `  # first controller
  plinth-coordinator init --name c0 --site lab --bind 10.0.0.11
  plinth-coordinator serve --data-dir /var/lib/plinth-coordinator

  # operate the site
  plinth-coordinator apply -f site.yaml --dry-run
  plinth-coordinator apply -f site.yaml
  plinth-coordinator get hosts --watch`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.identity, "identity", defaultIdentity(), "admin identity file written by init (env PLINTH_IDENTITY)")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "table", "output format: table, yaml or json")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	_ = root.RegisterFlagCompletionFunc("output", fixedCompletion("table", "yaml", "json"))
	root.AddCommand(
		newInit(g), newJoin(g), newServe(g), newRecover(g),
		newApply(g), newGet(g), newDescribe(g), newNode(g), newRetry(g), newDelete(g),
		newApp(g), newMembers(g), newSnapshot(g), newKubeconfig(g), newExplain(g), newDebug(g), newVersion(),
	)
	return root
}

func fixedCompletion(vals ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return vals, cobra.ShellCompDirectiveNoFileComp
	}
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "plinth-coordinator", version) },
	}
}
