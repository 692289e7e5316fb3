// Command plinth-drivers runs the agent's step drivers (host networking, containerd,
// OVS-DPDK, Ceph, the Kubernetes bootstrap) for one operation and exits. plinth-agent
// starts it for each step run and each drift pass (pkg/driverexec), so the daemon
// that idles on every host never holds the drivers' code and state; operators do not
// run it by hand.
//
//	plinth-drivers [flags] hello|run|check   < request.json > reply.json
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/plinth-dev/plinth/pkg/agent"
	"github.com/plinth-dev/plinth/pkg/driverexec"
	"github.com/plinth-dev/plinth/pkg/hostprofile"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "plinth-drivers:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := pflag.NewFlagSet(driverexec.Binary, pflag.ContinueOnError)
	stateDir := fs.String("state-dir", agent.DefaultStateDir, "the agent's state directory (driver state lives in its drivers/)")
	hostProfile := fs.String("host-profile", "", "what this kind of machine forces on the software Plinth runs ("+strings.Join(hostprofile.Names(), ", ")+"; none on real hosts)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	fs.AddFlagSet(pflag.CommandLine) // the drivers' own flags (drivers.go)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: %s [flags] %s|%s|%s < request.json\n\nplinth-agent runs this for each step and drift check; it reads one JSON request on stdin\nand writes one JSON reply on stdout (pkg/driverexec).\n\nFlags:\n%s",
			driverexec.Binary, driverexec.OpHello, driverexec.OpRun, driverexec.OpCheck, fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("want one operation (%s, %s or %s), got %d arguments", driverexec.OpHello, driverexec.OpRun, driverexec.OpCheck, fs.NArg())
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})).With("process", driverexec.Binary)
	hp, err := hostprofile.Lookup(*hostProfile)
	if err != nil {
		return err
	}
	reg, err := registry(*stateDir, hp, log)
	if err != nil {
		return err
	}
	return driverexec.Serve(ctx, reg, fs.Arg(0), driverexec.Hello{Version: version}, os.Stdin, os.Stdout)
}
