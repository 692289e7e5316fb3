package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"

	"github.com/plinth-dev/plinth/pkg/agent"
	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/driverexec"
	"github.com/plinth-dev/plinth/pkg/hostprofile"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/certreport"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
)

func newRun(g *globals) *cobra.Command {
	var configPath, gossipAddr, profile, hostProfile, driversPath, ovsRunDir, cephConf string
	var factsInterval time.Duration
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the agent daemon",
		Long: `run is the agent daemon (the plinth-agent systemd service). It delivers any result a
previous run left unreported, then follows this host's steps with blocking queries and
executes the runnable ones through its drivers, reporting start and result of each. It
also reports host facts when they change, checks finished steps for drift, gossips as
agent:<host> so the coordinators see the host is reachable, and renews its certificate
at half its lifetime.

Settings come from --config (YAML; keys name, stateDir, coordinators, gossipAddr,
gossipProfile, factsInterval, logLevel, hostProfile); flags given on the command line
override it. Steps and drift checks run in the drivers programs (--drivers, and
plinth-drivers-ceph beside it for Ceph's kinds), one process per run that exits when
done, so the daemon stays small. A host profile
(--host-profile) names what a kind of machine forces on the software Plinth runs
there; real hosts have none.
Under systemd (Type=notify) it reports READY=1 after the first successful fetch of its
steps and feeds the watchdog. It runs its Go code on one CPU unless GOMAXPROCS says
otherwise (its drivers, in their own processes, are not limited).`,
		Example: `  plinth-agent run
  plinth-agent run --state-dir /var/lib/plinth --gossip-addr 10.0.0.21:7444
  plinth-agent run --config /etc/plinth/agent.yaml --gossip-profile fast --facts-interval 10s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fc, err := agent.LoadFile(configPath, !cmd.Flag("config").Changed)
			if err != nil {
				return err
			}
			pick := func(flag, fromFlag, fromFile string) string {
				if cmd.Flag(flag).Changed || fromFile == "" {
					return fromFlag
				}
				return fromFile
			}
			stateDir := pick("state-dir", g.stateDir, fc.StateDir)
			gossipAddr = pick("gossip-addr", gossipAddr, fc.GossipAddr)
			profile = pick("gossip-profile", profile, fc.GossipProfile)
			if !cmd.Flag("facts-interval").Changed && fc.FactsInterval > 0 {
				factsInterval = time.Duration(fc.FactsInterval)
			}
			if profile != "lan" && profile != "fast" {
				return fmt.Errorf("--gossip-profile %q: want lan or fast", profile)
			}
			log, err := newLogger(pick("log-level", g.logLevel, fc.LogLevel))
			if err != nil {
				return err
			}
			hp, err := hostprofile.Lookup(pick("host-profile", hostProfile, fc.HostProfile))
			if err != nil {
				return err
			}
			args := []string{"--state-dir", stateDir, "--log-level", pick("log-level", g.logLevel, fc.LogLevel), "--host-profile", hp.Name}
			if ovsRunDir != "" {
				args = append(args, "--ovs-rundir", ovsRunDir)
			}
			if cephConf != "" {
				args = append(args, "--ceph-conf", cephConf)
			}
			drivers, err := driverexec.New(cmd.Context(), driverexec.Beside(driversPath), args, nil)
			if err != nil {
				return err
			}
			// Both programs speak the protocol; builds that differ still mean a host
			// half way through an upgrade, or a program copied in by hand.
			if hs := drivers.Hellos(); len(hs) > 1 && slices.ContainsFunc(hs, func(h driverexec.Hello) bool { return h.Version != hs[0].Version }) {
				log.Warn("the drivers programs come from different builds: install plinth-agent again", "programs", driverexec.Beside(driversPath), "hellos", hs)
			}
			wd, _ := daemon.SdWatchdogEnabled(false)
			daemonProcs()
			return agent.Run(cmd.Context(), agent.Config{
				Name:             fc.Name,
				StateDir:         stateDir,
				Coordinators:     fc.Coordinators,
				GossipAddr:       gossipAddr,
				GossipProfile:    profile,
				FactsInterval:    factsInterval,
				Logger:           log,
				Drivers:          drivers,
				Notify:           func(s string) { _, _ = daemon.SdNotify(false, s) },
				WatchdogInterval: wd / 2,
				KubeCertificates: func() []api.CertValidity { return certreport.Validity("") },
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", agent.DefaultConfigFile, "agent config file (YAML); a missing default file is fine")
	f.StringVar(&gossipAddr, "gossip-addr", "", fmt.Sprintf("ip:port to gossip on (default: this host's IP towards the coordinators, port %d)", agent.DefaultGossipPort))
	f.StringVar(&profile, "gossip-profile", "lan", "gossip timing: lan, or fast for labs and tests")
	f.DurationVar(&factsInterval, "facts-interval", agent.DefaultFactsInterval, "how often host facts are gathered (posted only when they change)")
	f.StringVar(&driversPath, "drivers", driverexec.Locate(), "the drivers program steps run in (Ceph's run in "+driverexec.CephBinary+" beside it)")
	f.StringVar(&ovsRunDir, "ovs-rundir", "", "Open vSwitch run directory for OVS steps (default: $OVS_RUNDIR, else the drivers' "+ovsspec.DefaultRunDir+")")
	f.StringVar(&cephConf, "ceph-conf", "", "ceph.conf for Ceph steps whose manifest names no configFile or monitors (default: the drivers' "+cephspec.SystemConfigFile+")")
	f.StringVar(&hostProfile, "host-profile", "", "what this kind of machine forces on the software Plinth runs ("+strings.Join(hostprofile.Names(), ", ")+"; none on real hosts)")
	_ = cmd.RegisterFlagCompletionFunc("host-profile", fixedCompletion(hostprofile.Names()...))
	_ = cmd.RegisterFlagCompletionFunc("gossip-profile", fixedCompletion("lan", "fast"))
	return cmd
}

// daemonProcs runs the daemon's Go code on one CPU unless GOMAXPROCS is set. Its
// own work is waiting (blocking queries, gossip timers, a child per step); with a
// P per core the runtime spins idle threads at every wake-up, which cost an idle
// host more than the work (bench-agent, idle: 1.06 % -> 0.47 % of a core).
func daemonProcs() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
