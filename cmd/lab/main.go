// Command plinth-lab runs a whole Plinth site on this machine: hosts as network
// namespaces on a bridge, real coordinators (2 controllers + witness) and one real
// agent per host, converging examples/lab/site.yaml. `make demo` runs `up`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/plinth-dev/plinth/pkg/lab"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	var dir, bin, manifest string
	var timeout time.Duration
	root := &cobra.Command{
		Use:           "plinth-lab",
		Short:         "Run a Plinth site in network namespaces on this machine",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&dir, "dir", "/var/tmp/plinth-lab", "where the lab keeps its state, keys and logs")
	up := &cobra.Command{
		Use:   "up",
		Short: "Create the lab, enrol every host, apply the site and show progress until it is Ready",
		Long: `up creates one network namespace per host (controller-0, controller-1, witness,
compute-0) on a bridge, starts coordinators on the two controllers and the witness,
enrols an agent on every host with a one-time token, applies the lab manifest and
follows the site until it is Ready. Everything keeps running afterwards so you can
explore it; 'plinth-lab down' removes it all.`,
		Example: `  sudo plinth-lab up
  export PLINTH_IDENTITY=/var/tmp/plinth-lab/admin.json
  plinth-coordinator get hosts
  sudo plinth-lab down`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := lab.CheckRoot(); err != nil {
				return err
			}
			if lab.Exists(dir) {
				return fmt.Errorf("a lab is already recorded in %s: run `plinth-lab down --dir %s` (or `make demo-down`) first", dir, dir)
			}
			bin, err := filepath.Abs(bin)
			if err != nil {
				return err
			}
			if manifest, err = filepath.Abs(manifest); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			l := lab.New(dir, bin, "plab")
			l.Detach = true
			start := time.Now()
			if err := l.Up(cmd.Context(), lab.DefaultSpec(manifest), out); err != nil {
				return fmt.Errorf("%w\nlogs: %s/logs; clean up with `plinth-lab down --dir %s`", err, dir, dir)
			}
			ready, err := l.WaitSiteReady(cmd.Context(), out, timeout)
			if err != nil {
				return fmt.Errorf("%w\nlogs: %s/logs; clean up with `plinth-lab down --dir %s`", err, dir, dir)
			}
			verdict := "Site Ready"
			if !ready {
				verdict = "Every step the lab can run is done"
			}
			fmt.Fprintf(out, "\n%s %s after start.\n\nExplore:\n  export PLINTH_IDENTITY=%s\n  %s/plinth-coordinator get hosts\n  %s/plinth-coordinator describe host compute-0\n  %s/plinth-coordinator get events\n\nRemove everything: make demo-down (or plinth-lab down --dir %s)\n",
				verdict, time.Since(start).Round(100*time.Millisecond), l.Identity, bin, bin, bin, dir)
			return nil
		},
	}
	up.Flags().StringVar(&bin, "bin", "bin", "directory holding plinth-coordinator and plinth-agent")
	up.Flags().StringVar(&manifest, "manifest", "examples/lab/site.yaml", "site manifest to apply")
	up.Flags().DurationVar(&timeout, "timeout", 3*time.Minute, "how long to wait for the site to be Ready")
	down := &cobra.Command{
		Use:     "down",
		Short:   "Remove every namespace, link, process and file the lab made",
		Example: `  sudo plinth-lab down`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := lab.CheckRoot(); err != nil {
				return err
			}
			if err := lab.DownDir(cmd.Context(), dir); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "lab in %s removed\n", dir)
			return nil
		},
	}
	root.AddCommand(up, down)
	return root
}
