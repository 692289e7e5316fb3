package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/plinth-dev/plinth/pkg/lab"
)

// showApp installs the application with the operator's CLI and shows it working:
// its status, its pods and where they run, and an answer through its Service.
func showApp(ctx context.Context, l *lab.Lab, file, kubectl, kubeconfig string, out, errOut io.Writer, start time.Time) error {
	file, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nInstalling the application in %s (plinth-coordinator app upload, app apply --wait):\n", file)
	name, err := l.InstallApp(ctx, file, out, 10*time.Minute)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nApplication %s applied %s after start.\n\n", name, time.Since(start).Round(100*time.Millisecond))
	st, err := l.CLI(ctx, "app", "status", name)
	if err != nil {
		return err
	}
	fmt.Fprint(out, st)
	k := func(args ...string) error {
		c := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		c.Stdout, c.Stderr = out, errOut
		return c.Run()
	}
	fmt.Fprintf(out, "\nIts pods (kubectl -n %s get pods -o wide):\n", name)
	if err := k("-n", name, "get", "pods", "-o", "wide"); err != nil {
		return fmt.Errorf("kubectl get pods: %w", err)
	}
	fmt.Fprintf(out, "\nIts Service answering, from inside the cluster (kubectl -n %s exec deploy/hello -- hello get http://hello.%s.svc.cluster.local/):\n", name, name)
	if err := k("-n", name, "exec", "deploy/hello", "--", "hello", "get", "http://hello."+name+".svc.cluster.local/"); err != nil {
		return fmt.Errorf("the demo Service: %w", err)
	}
	return nil
}
