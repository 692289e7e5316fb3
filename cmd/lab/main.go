// Command plinth-lab runs a whole Plinth site on this machine, the way an operator
// stands one up on real hardware: hosts are Debian root filesystems booted with
// systemd-nspawn (systemd as PID 1) on a bridge, and the site install script from the
// site bundle installs and enrols Plinth on each: coordinators on the two controllers
// and the witness, agents everywhere. `make demo` runs `up`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/plinth-dev/plinth/pkg/lab"
	"github.com/plinth-dev/plinth/pkg/nspawn"
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
	var dir, bin, manifest, bundleFile, runcWrapper, app string
	var timeout time.Duration
	root := &cobra.Command{
		Use:           "plinth-lab",
		Short:         "Run a Plinth site on booted hosts (systemd-nspawn) on this machine",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&dir, "dir", "/var/tmp/plinth-lab", "where the lab keeps its state, keys, hosts and logs")
	up := &cobra.Command{
		Use:   "up",
		Short: "Boot the lab hosts, install Plinth on each from the site bundle, apply the site and show progress until it is Ready",
		Long: `up boots one Debian host per lab machine (controller-0, controller-1, witness,
compute-0, compute-1) with systemd-nspawn, each in its own network namespace on a bridge and its
own cgroup subtree, from a cached root filesystem (built once with debootstrap). It
then runs the site bundle's install script on every host: --init on controller-0,
--join on controller-1 and the witness, --agent on the compute hosts, with one-time
tokens. Plinth's coordinators and agents run as the hosts' systemd units. Finally it
applies the lab manifest and follows the site until it is Ready — networking, OVS,
Ceph and a Kubernetes cluster built by Plinth's own steps — and prints the cluster's
nodes. Everything keeps running afterwards; 'plinth-lab down' removes it all.`,
		Example: `  make bundle && sudo plinth-lab up --bundle dist/plinth-bundle-0.1.0.tar
  export PLINTH_IDENTITY=/var/tmp/plinth-lab/admin.json
  plinth-coordinator get hosts
  sudo plinth-lab exec controller-0 -- journalctl -u plinth-coordinator -n 20
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
			start := time.Now()
			if l.BundleDir, err = lab.UnpackBundle(cmd.Context(), bundleFile, filepath.Join(dir, "bundle")); err != nil {
				return err
			}
			if runcWrapper != "" {
				l.RuncWrapper = runcWrapper
			}
			fail := func(err error) error {
				return fmt.Errorf("%w\nlogs: %s/logs (host consoles: %s/hosts/*/console.log); clean up with `plinth-lab down --dir %s`", err, dir, dir, dir)
			}
			if err := l.Up(cmd.Context(), lab.DefaultSpec(manifest), out); err != nil {
				return fail(err)
			}
			if err := l.WaitSiteReady(cmd.Context(), out, timeout); err != nil {
				return fail(err)
			}
			fmt.Fprintf(out, "\nSite Ready %s after start.\n", time.Since(start).Round(100*time.Millisecond))
			kubeconfig, kubectl, ok, err := l.Kubeconfig(cmd.Context())
			if err != nil {
				return err
			}
			if ok {
				nodes := exec.CommandContext(cmd.Context(), kubectl, "--kubeconfig", kubeconfig, "get", "nodes", "-o", "wide")
				nodes.Stdout, nodes.Stderr = out, cmd.ErrOrStderr()
				fmt.Fprintf(out, "\nThe site's Kubernetes cluster, built by Plinth's steps (kubectl get nodes -o wide):\n")
				if err := nodes.Run(); err != nil {
					return fmt.Errorf("kubectl get nodes: %w", err)
				}
				fmt.Fprintf(out, "\nUse it:\n  %s --kubeconfig %s get pods -A\n  (or: %s/plinth-coordinator kubeconfig --write ~/.kube/config)\n", kubectl, kubeconfig, bin)
				if app != "" {
					if err := showApp(cmd.Context(), l, app, kubectl, kubeconfig, out, cmd.ErrOrStderr(), start); err != nil {
						return fail(err)
					}
				}
			}
			fmt.Fprintf(out, "\nExplore:\n  export PLINTH_IDENTITY=%s\n  %s/plinth-coordinator get hosts\n  %s/plinth-coordinator describe host compute-0\n  %s/plinth-coordinator get events\n  sudo %s/plinth-lab exec compute-0 -- systemctl status plinth-agent\n\nRemove everything: make demo-down (or plinth-lab down --dir %s)\n",
				l.Identity, bin, bin, bin, bin, dir)
			return nil
		},
	}
	up.Flags().StringVar(&bin, "bin", "bin", "directory holding plinth-coordinator (the CLI) and runc-lab")
	up.Flags().StringVar(&manifest, "manifest", "examples/lab/site.yaml", "site manifest to apply")
	up.Flags().StringVar(&bundleFile, "bundle", "", "site bundle (make bundle: dist/plinth-bundle-VERSION.tar) the hosts install from (required)")
	up.Flags().StringVar(&runcWrapper, "runc-wrapper", "", "the lab profile's runc wrapper (default: BIN/runc-lab when present)")
	up.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the site to be Ready")
	up.Flags().StringVar(&app, "app", lab.DemoApp, "application to upload and apply once the cluster is up (\"\" for none; its archives: make demo-charts)")
	_ = up.MarkFlagRequired("bundle")
	down := &cobra.Command{
		Use:     "down",
		Short:   "Power off and remove every host, namespace, link, mount, cgroup and file the lab made",
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
	execCmd := &cobra.Command{
		Use:   "exec HOST -- COMMAND [ARG...]",
		Short: "Run a command inside a lab host (all its namespaces), as on its console",
		Example: `  sudo plinth-lab exec controller-0 -- systemctl status plinth-coordinator
  sudo plinth-lab exec compute-0 -- journalctl -u plinth-agent -f`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lab.CheckRoot(); err != nil {
				return err
			}
			h, err := nspawn.Load(filepath.Join(dir, "hosts", args[0]))
			if err != nil {
				return fmt.Errorf("no lab host %q in %s: %w", args[0], dir, err)
			}
			c, err := h.Command(cmd.Context(), args[1:]...)
			if err != nil {
				return err
			}
			c.Stdin, c.Stdout, c.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
			if err := c.Run(); err != nil {
				if ee, ok := err.(*exec.ExitError); ok {
					os.Exit(ee.ExitCode())
				}
				return err
			}
			return nil
		},
	}
	root.AddCommand(up, down, execCmd)
	return root
}
