// Package driverprog is the command line every drivers program shares
// (plinth-drivers, plinth-drivers-ceph): plinth-agent gives each the same flags, so
// they are parsed in one place, and each program only constructs its drivers. The
// registry it serves must match the step kind table's kinds for that program.
package driverprog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/driverexec"
	"github.com/plinth-dev/plinth/pkg/hostprofile"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
	"github.com/plinth-dev/plinth/pkg/stepkind"
)

// Options are what the agent's flags give a program's drivers.
type Options struct {
	// StateDir is the agent's state directory; driver state lives in its drivers/.
	StateDir string
	// HostProfile is what this kind of machine forces on containerd and kubeadm.
	HostProfile hostprofile.Profile
	Log         *slog.Logger
	// OVSRunDir and CephConf are "" unless the agent was given them: each driver
	// then uses its own default.
	OVSRunDir string
	CephConf  string
}

// Build constructs a program's drivers, keyed by kind.
type Build func(Options) map[string]driver.Driver

// Exit is a drivers program's main: Main on the process's arguments and standard
// streams, cancelled by SIGINT or SIGTERM; an error is printed and exits 1.
func Exit(program, version string, build Build) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Main(ctx, program, version, os.Args[1:], os.Stdin, os.Stdout, build)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, program+":", err)
		os.Exit(1)
	}
}

// Main runs one operation of program from args (the flags, then hello, run or
// check): the request on stdin, the reply on stdout, the log on stderr.
func Main(ctx context.Context, program, version string, args []string, stdin io.Reader, stdout io.Writer, build Build) error {
	fs := pflag.NewFlagSet(program, pflag.ContinueOnError)
	// No default: plinth-agent always passes its own, and this package does not
	// link the agent's (pkg/agent) to know it.
	stateDir := fs.String("state-dir", "", "the agent's state directory, where driver state lives in drivers/ (required)")
	hostProfile := fs.String("host-profile", "", "what this kind of machine forces on the software Plinth runs ("+strings.Join(hostprofile.Names(), ", ")+"; none on real hosts)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	ovsRunDir := fs.String("ovs-rundir", "", "Open vSwitch run directory: db.sock, ovs-vswitchd's control socket (default $OVS_RUNDIR, else "+ovsspec.DefaultRunDir+")")
	cephConf := fs.String("ceph-conf", "", "ceph.conf for Ceph steps whose manifest names no configFile or monitors (default "+cephspec.SystemConfigFile+")")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: %s [flags] %s|%s|%s < request.json\n\nplinth-agent runs this for each step and drift check; it reads one JSON request on stdin\nand writes one JSON reply on stdout (pkg/driverexec).\n\nFlags:\n%s",
			program, driverexec.OpHello, driverexec.OpRun, driverexec.OpCheck, fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("want one operation (%s, %s or %s), got %d arguments", driverexec.OpHello, driverexec.OpRun, driverexec.OpCheck, fs.NArg())
	}
	if *stateDir == "" {
		fs.Usage()
		return errors.New("--state-dir is required: the agent's state directory")
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})).With("process", program)
	hp, err := hostprofile.Lookup(*hostProfile)
	if err != nil {
		return err
	}
	byKind := build(Options{StateDir: *stateDir, HostProfile: hp, Log: log, OVSRunDir: *ovsRunDir, CephConf: *cephConf})
	reg, err := Registry(program, byKind)
	if err != nil {
		return err
	}
	return driverexec.Serve(ctx, reg, fs.Arg(0), driverexec.Hello{Version: version}, stdin, stdout)
}

// Registry holds program's drivers in the table's order. It refuses drivers that
// run another kind than they are keyed by, and a set that differs from the kinds
// the table gives program.
func Registry(program string, byKind map[string]driver.Driver) (*driver.Registry, error) {
	ds := make([]driver.Driver, 0, len(byKind))
	for _, k := range stepkind.Names() {
		d, ok := byKind[k]
		if !ok {
			continue
		}
		if d.Kind() != k {
			return nil, fmt.Errorf("%s: the driver registered for %s runs %s", program, k, d.Kind())
		}
		ds = append(ds, d)
	}
	if err := stepkind.Check(program, slices.Collect(maps.Keys(byKind))); err != nil {
		return nil, err
	}
	return driver.NewRegistry(ds...)
}

// Check is what each program's test asks of its drivers: Registry accepts them for
// program, and each comes from the package the table names for its kind.
func Check(program string, byKind map[string]driver.Driver) error {
	if _, err := Registry(program, byKind); err != nil {
		return err
	}
	return checkPackages(byKind)
}

// checkPackages reports every driver in byKind that comes from another package than
// the table's DriverPackage for its kind.
func checkPackages(byKind map[string]driver.Driver) error {
	const module = "github.com/plinth-dev/plinth/"
	var bad []string
	for _, k := range slices.Sorted(maps.Keys(byKind)) {
		kind, ok := stepkind.Lookup(k)
		if !ok {
			bad = append(bad, k+": not in the table")
			continue
		}
		typ := reflect.TypeOf(byKind[k])
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if got := typ.PkgPath(); got != module+kind.DriverPackage {
			bad = append(bad, fmt.Sprintf("%s: driver %v comes from %s; the table says %s", k, typ, got, kind.DriverPackage))
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "\n"))
	}
	return nil
}
