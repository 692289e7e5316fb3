package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"

	"github.com/plinth-dev/plinth/pkg/coordinator"
)

type globals struct {
	identity string
	output   string
	logLevel string
}

func defaultIdentity() string {
	if p := os.Getenv("PLINTH_IDENTITY"); p != "" {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "admin.json"
	}
	return filepath.Join(home, ".plinth", "admin.json")
}

func (g *globals) logger() *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}

const defaultDataDir = "/var/lib/plinth-coordinator"

// addrFlags are the listen addresses shared by init and join.
type addrFlags struct {
	bind                             string
	api, join, raft, gossip, profile string
	dataDir, name                    string
	agentCertTTL                     time.Duration
}

func (a *addrFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&a.name, "name", "", "this coordinator's name (required)")
	f.StringVar(&a.dataDir, "data-dir", defaultDataDir, "where the coordinator keeps its keys and Raft data")
	f.StringVar(&a.bind, "bind", "", "IP to listen on; sets --api-addr IP:7440, --join-addr IP:7441, --raft-addr IP:7442, --gossip-addr IP:7443 unless given")
	f.StringVar(&a.api, "api-addr", "", "mTLS API address (ip:port)")
	f.StringVar(&a.join, "join-addr", "", "enrolment address for hosts joining with a token (ip:port)")
	f.StringVar(&a.raft, "raft-addr", "", "Raft address (ip:port, mTLS)")
	f.StringVar(&a.gossip, "gossip-addr", "", "membership gossip address (ip:port, encrypted)")
	f.StringVar(&a.profile, "profile", "lan", "timing profile: lan, or fast for labs and tests")
	f.DurationVar(&a.agentCertTTL, "agent-cert-ttl", 24*time.Hour, "lifetime of agent certificates (agents renew at half-life)")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.RegisterFlagCompletionFunc("profile", fixedCompletion("lan", "fast"))
}

func (a *addrFlags) config() (coordinator.Config, error) {
	pick := func(v string, port int) string {
		if v != "" || a.bind == "" {
			return v
		}
		return net.JoinHostPort(a.bind, fmt.Sprint(port))
	}
	c := coordinator.Config{
		Name: a.name, APIAddr: pick(a.api, 7440), JoinAddr: pick(a.join, 7441),
		RaftAddr: pick(a.raft, 7442), GossipAddr: pick(a.gossip, 7443), Profile: a.profile,
		AgentCertTTL: coordinator.Duration(a.agentCertTTL),
	}
	if c.APIAddr == "" || c.JoinAddr == "" || c.RaftAddr == "" || c.GossipAddr == "" {
		return c, errors.New("give --bind IP, or all of --api-addr, --join-addr, --raft-addr and --gossip-addr")
	}
	return c, nil
}

func newInit(g *globals) *cobra.Command {
	var a addrFlags
	var site, adminPath string
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create the site CA and the first coordinator",
		Long: `init creates the site's certificate authority (keys 0600), this coordinator's
identity, the data key that seals secrets at rest, and an admin identity file for the
CLI. Run it once, on the first controller; then start 'serve'.`,
		Example: `  plinth-coordinator init --name c0 --site lab --bind 10.0.0.11 \
      --data-dir /var/lib/plinth-coordinator --admin-identity ~/.plinth/admin.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			cfg.Site = site
			if adminPath == "" {
				adminPath = g.identity
			}
			if err := coordinator.Init(coordinator.InitOptions{DataDir: a.dataDir, Config: cfg, AdminIdentity: adminPath}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Initialised coordinator %s of site %s in %s.\nAdmin identity: %s\nNext: plinth-coordinator serve --data-dir %s\n", cfg.Name, site, a.dataDir, adminPath, a.dataDir)
			return nil
		},
	}
	a.register(cmd)
	cmd.Flags().StringVar(&site, "site", "", "site name (required)")
	cmd.Flags().StringVar(&adminPath, "admin-identity", "", "where to write the admin identity file (default: --identity)")
	_ = cmd.MarkFlagRequired("site")
	return cmd
}

func newJoin(g *globals) *cobra.Command {
	var a addrFlags
	var token string
	var coords []string
	var witness bool
	cmd := &cobra.Command{
		Use:   "join",
		Short: "Join this machine to the coordinator cluster as a controller or witness",
		Long: `join enrols this coordinator with a one-time token from
'plinth-coordinator node enroll NAME --role coordinator' (or --role witness), pinning the
site CA carried in the token. Then start 'serve': it asks the leader to add it as a voter.`,
		Example: `  plinth-coordinator join --name c1 --bind 10.0.0.12 --coordinator 10.0.0.11:7441 --token plinth1.…
  plinth-coordinator join --name w --bind 10.0.0.13 --witness --coordinator 10.0.0.11:7441 --token plinth1.…`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			cfg.Witness = witness
			if err := coordinator.Join(cmd.Context(), coordinator.JoinOptions{DataDir: a.dataDir, Config: cfg, Token: token, JoinAddrs: splitList(coords)}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Coordinator %s enrolled. Next: plinth-coordinator serve --data-dir %s\n", cfg.Name, a.dataDir)
			return nil
		},
	}
	a.register(cmd)
	cmd.Flags().StringVar(&token, "token", "", "one-time join token (required)")
	cmd.Flags().StringSliceVar(&coords, "coordinator", nil, "join address(es) of existing coordinators, ip:port (required)")
	cmd.Flags().BoolVar(&witness, "witness", false, "join as a witness: votes in Raft, hands leadership to a controller")
	_ = cmd.MarkFlagRequired("token")
	_ = cmd.MarkFlagRequired("coordinator")
	return cmd
}

func splitList(in []string) []string {
	var out []string
	for _, s := range in {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func newServe(g *globals) *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the coordinator daemon",
		Long: `serve runs Raft, the mTLS API, the enrolment endpoint and membership gossip. Under
systemd (Type=notify) it reports READY=1 once Raft has a leader and feeds the watchdog.`,
		Example: `  plinth-coordinator serve --data-dir /var/lib/plinth-coordinator`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			wd, _ := daemon.SdWatchdogEnabled(false)
			return coordinator.Run(cmd.Context(), dataDir, coordinator.RunOptions{
				Logger:           g.logger(),
				Notify:           func(s string) { _, _ = daemon.SdNotify(false, s) },
				WatchdogInterval: wd / 2,
			})
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultDataDir, "coordinator data directory")
	return cmd
}

func newRecover(g *globals) *cobra.Command {
	var dataDir string
	var force bool
	cmd := &cobra.Command{
		Use:   "recover --force-single",
		Short: "Make this stopped coordinator a cluster of one (fenced recovery)",
		Long: `With two controllers and no witness, losing one controller stops all writes: that is
deliberate, because the survivor cannot tell a dead peer from a partition. When the peer
is gone for good, FIRST fence it (power it off or wipe its data dir), stop the survivor's
coordinator, and run this on the survivor. Its Raft configuration becomes itself alone,
and certificates the fenced peers held before now are refused on the Raft port, so a
returning peer cannot form a second cluster. Re-add a controller later with
'node enroll NAME --role coordinator' and 'join' on a wiped machine.`,
		Example: `  systemctl stop plinth-coordinator
  plinth-coordinator recover --force-single --data-dir /var/lib/plinth-coordinator
  systemctl start plinth-coordinator`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !force {
				return errors.New("recover rewrites Raft membership: pass --force-single to confirm the peer is fenced")
			}
			fenced, err := coordinator.RecoverFenced(dataDir, g.logger())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Recovered: this coordinator is now a cluster of one. Fenced: %s.\nStart it again with serve.\n", strings.Join(fenced, ", "))
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultDataDir, "coordinator data directory (the coordinator must be stopped)")
	cmd.Flags().BoolVar(&force, "force-single", false, "confirm: the other controller is fenced and this one becomes a cluster of one")
	return cmd
}
