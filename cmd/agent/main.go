// Command plinth-agent runs on every host of a Plinth site: `join` enrols the host
// with a one-time token, `run` is the daemon that executes the host's steps.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/plinth-dev/plinth/pkg/agent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type globals struct {
	stateDir string
	logLevel string
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "plinth-agent",
		Short: "Plinth host agent: enrol this host and run its steps",
		Long: `plinth-agent runs on every host of a Plinth site. 'join' enrols the host once with a
token from 'plinth-coordinator node enroll'; 'run' (the plinth-agent systemd service)
then fetches the host's steps from the coordinators, executes them, and reports
results, drift and host facts. The agent never decides what to run: the coordinators
plan, the agent executes.`,
		Example: `  # on the host, once
  plinth-agent join --coordinator 10.0.0.11:7441,10.0.0.12:7441 --token plinth1.…
  systemctl enable --now plinth-agent

  # look around
  plinth-agent status
  plinth-agent facts -o yaml`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.stateDir, "state-dir", agent.DefaultStateDir, "where the agent keeps its identity, pending results and driver state")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	_ = root.RegisterFlagCompletionFunc("log-level", fixedCompletion("debug", "info", "warn", "error"))
	root.AddCommand(newJoin(g), newRun(g), newStatus(g), newFacts(), newVersion())
	return root
}

func newLogger(level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})), nil
}

func fixedCompletion(vals ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return vals, cobra.ShellCompDirectiveNoFileComp
	}
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "plinth-agent", version) },
	}
}
