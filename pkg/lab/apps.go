package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
)

// DemoApp is the application `make demo` installs on the lab's cluster: a small
// chart set that reads the generated Ceph Secret, lands on the compute nodes by
// OpenStack-Helm's labels and answers through a Service (examples/apps/demo).
const DemoApp = "examples/apps/demo/application.yaml"

// InstallApp uploads the application in file (or updates it, if it is already
// uploaded) and applies it with the operator's CLI, printing its progress, until
// it is applied or timeout passes. It returns the application's name.
func (l *Lab) InstallApp(ctx context.Context, file string, out io.Writer, timeout time.Duration) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("lab: application: %w", err)
	}
	m, err := api.Decode(file, data)
	if err != nil {
		return "", err
	}
	if len(m.Applications) != 1 {
		return "", fmt.Errorf("lab: %s: want one Application document, found %d", file, len(m.Applications))
	}
	name := m.Applications[0].Metadata.Name
	if o, err := l.CLI(ctx, "app", "upload", "-f", file); err != nil {
		if !strings.Contains(err.Error(), "already uploaded") {
			return name, err
		}
		if o, err = l.CLI(ctx, "app", "update", "-f", file); err != nil {
			return name, err
		}
		fmt.Fprint(out, o)
	} else {
		fmt.Fprint(out, o)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, l.coordinatorBin(), "--identity", l.Identity, "app", "apply", name, "--wait")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		st, _ := l.CLI(context.WithoutCancel(ctx), "app", "status", name)
		return name, fmt.Errorf("lab: application %s not applied within %s: %w\n%s", name, timeout, err, st)
	}
	return name, nil
}
