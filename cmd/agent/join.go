package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/plinth-dev/plinth/pkg/agent"
)

func newJoin(g *globals) *cobra.Command {
	var o agent.JoinOptions
	var coords, ips []string
	var tokenFile, from string
	cmd := &cobra.Command{
		Use:   "join --coordinator ADDR[,ADDR] --token TOKEN",
		Short: "Enrol this host with a one-time token",
		Long: `join enrols this host with a token from 'plinth-coordinator node enroll NAME'. It pins the
site CA the token carries, generates the host's private key (it never leaves
--state-dir/pki, mode 0600), and records the certificate, the coordinators' API
addresses and the gossip key for 'run'. The token is bound to a host name: --name
(default: the hostname) must match it.

Running join again on an enrolled host changes nothing and exits 0; --force enrols
afresh (a new token is needed).`,
		Example: `  plinth-agent join --coordinator 10.0.0.11:7441 --token plinth1.…
  plinth-agent join --name compute-0 --coordinator 10.0.0.11:7441,10.0.0.12:7441 --token-file /root/token
  echo "$TOKEN" | plinth-agent join --coordinator 10.0.0.11:7441 --token-file -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (o.Token == "") == (tokenFile == "") {
				return errors.New("give exactly one of --token and --token-file")
			}
			if tokenFile != "" {
				t, err := readToken(cmd.InOrStdin(), tokenFile)
				if err != nil {
					return err
				}
				o.Token = t
			}
			if o.Name == "" {
				h, err := os.Hostname()
				if err != nil {
					return fmt.Errorf("host name: %w (pass --name)", err)
				}
				o.Name = h
			}
			for _, s := range splitList(ips) {
				ip := net.ParseIP(s)
				if ip == nil {
					return fmt.Errorf("--ip %q: not an IP address", s)
				}
				o.IPs = append(o.IPs, ip)
			}
			if from != "" {
				if o.SourceIP = net.ParseIP(from); o.SourceIP == nil {
					return fmt.Errorf("--from %q: not an IP address of this host", from)
				}
			}
			o.StateDir = g.stateDir
			o.JoinAddrs = splitList(coords)
			out := cmd.OutOrStdout()
			err := agent.Join(cmd.Context(), o)
			if errors.Is(err, agent.ErrAlreadyEnrolled) {
				fmt.Fprintf(out, "Nothing changed: %s.\n", strings.TrimPrefix(err.Error(), "agent: join: "))
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "Host %s enrolled; identity in %s.\nNext: systemctl enable --now plinth-agent (or: plinth-agent run --state-dir %s)\n", o.Name, g.stateDir, g.stateDir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&coords, "coordinator", nil, "enrolment address(es) of the coordinators, ip:port (port 7441 by default); required")
	f.StringVar(&o.Token, "token", "", "one-time join token (visible in the process list: prefer --token-file)")
	f.StringVar(&tokenFile, "token-file", "", "read the token from this file, or '-' for stdin")
	f.StringVar(&o.Name, "name", "", "this host's name as declared in the site (default: the hostname)")
	f.StringSliceVar(&ips, "ip", nil, "IP addresses to put in the agent certificate (optional)")
	f.StringVar(&from, "from", "", "enrol from this local address, e.g. the management one (default: the kernel's choice)")
	f.BoolVar(&o.Force, "force", false, "enrol again even if this host already has a valid identity")
	_ = cmd.MarkFlagRequired("coordinator")
	return cmd
}

func readToken(stdin io.Reader, path string) (string, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(stdin, 4096))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// splitList accepts repeated flags and comma-separated values.
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
