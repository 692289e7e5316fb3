package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/plinth-dev/plinth/pkg/wire"
)

func newKubeconfig(g *globals) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print the Kubernetes admin kubeconfig (cluster-admin through the VIP)",
		Long: `kubeconfig prints the admin kubeconfig that kube.init produced on the first
controller. The coordinators keep it sealed in the replicated state and open it only
for an admin identity; each read is recorded as an event. It grants cluster-admin:
keep it like a root password.`,
		Example: `  plinth-coordinator kubeconfig > admin.conf
  plinth-coordinator kubeconfig --write ~/.kube/config
  KUBECONFIG=admin.conf kubectl get nodes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			if _, err := c.Do(cmd.Context(), "GET", wire.PathKubeconfig, nil, &buf); err != nil {
				return err
			}
			if file == "" {
				_, err = cmd.OutOrStdout().Write(buf.Bytes())
				return err
			}
			if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
				return fmt.Errorf("write %s: %w", file, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "admin kubeconfig written to %s (mode 0600)\n", file)
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "write", "", "write the kubeconfig to this file (mode 0600) instead of printing it")
	_ = cmd.MarkFlagFilename("write")
	return cmd
}
