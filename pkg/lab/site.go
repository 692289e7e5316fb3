package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/lab/labceph"
	"github.com/plinth-dev/plinth/pkg/nspawn"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/state"
)

// HostSpec is one lab host.
type HostSpec struct {
	Name string
	// Octet is the last octet of the host's management address in the lab subnet.
	Octet int
	// Role is the agent's enrolment role: controller, worker or storage.
	Role string
	// Coordinator runs a coordinator on this host: "init", "join" or "witness".
	Coordinator string
}

// Spec describes a lab site.
type Spec struct {
	// Subnet is the /24 of the lab bridge; the bridge takes .1.
	Subnet string
	Hosts  []HostSpec
	// Manifest is the site manifest file applied once every agent is enrolled.
	Manifest string
	// Site is the site name given to init.
	Site string
	// BridgeAddrs are more addresses of the lab bridge (CIDR): the machine's own place
	// on the lab site's other networks, e.g. cluster-host, to reach its VIP.
	BridgeAddrs []string
}

// DefaultSpec is the lab of examples/lab/site.yaml: two controllers and a witness
// running coordinators, and two compute hosts; every host runs an agent.
func DefaultSpec(manifest string) Spec {
	return Spec{
		Subnet:   "10.211.0.0/24",
		Site:     "lab",
		Manifest: manifest,
		Hosts: []HostSpec{
			{Name: "controller-0", Octet: 11, Role: "controller", Coordinator: "init"},
			{Name: "controller-1", Octet: 12, Role: "controller", Coordinator: "join"},
			{Name: "witness", Octet: 13, Role: "controller", Coordinator: "witness"},
			{Name: "compute-0", Octet: 21, Role: "worker"},
			{Name: "compute-1", Octet: 22, Role: "worker"},
		},
		BridgeAddrs: []string{"10.214.0.1/24"},
	}
}

// CoordinatorPort is the API port coordinators use in the lab (join, raft and
// gossip take the next three), the install script's default.
const CoordinatorPort = 7440

// CephHost is the lab host that runs the one-node Ceph cluster (the Debian
// packages' units) and the ceph.* steps.
const CephHost = "controller-0"

func (s Spec) ip(octet int) (string, string, error) {
	_, n, err := net.ParseCIDR(s.Subnet)
	if err != nil {
		return "", "", fmt.Errorf("lab: subnet %q: %w", s.Subnet, err)
	}
	ip := n.IP.To4()
	if ip == nil {
		return "", "", fmt.Errorf("lab: subnet %q: want IPv4", s.Subnet)
	}
	addr := net.IPv4(ip[0], ip[1], ip[2], byte(octet)).String()
	ones, _ := n.Mask.Size()
	return addr, fmt.Sprintf("%s/%d", addr, ones), nil
}

// Up builds the whole lab: bridge, booted hosts, then the site install script on
// each, as an operator would run it on real machines: --init on the first controller,
// --join on the other controller and the witness, --agent everywhere else, with
// tokens the first coordinator issues. Then it applies the manifest. It does not
// wait for convergence: see WaitSiteReady.
func (l *Lab) Up(ctx context.Context, spec Spec, progress io.Writer) error {
	say := func(format string, args ...any) {
		if progress != nil {
			fmt.Fprintf(progress, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
		}
	}
	if l.BundleDir == "" {
		return errors.New("lab: no site bundle: build one with `make bundle` and pass --bundle")
	}
	if l.RuncWrapper == "" {
		// The nspawn-lab host profile points containerd at it: without it no pod starts.
		return fmt.Errorf("lab: no runc wrapper for the lab profile: `make build` builds %s", filepath.Join(l.Bin, "runc-lab"))
	}
	if l.Rootfs == "" {
		began := time.Now()
		dir, err := nspawn.BuildRootfs(ctx, nspawn.RootfsOptions{Profile: nspawn.LabProfile(), Progress: progress})
		if err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		l.Rootfs = dir
		say("rootfs %s ready (%.1fs)", dir, time.Since(began).Seconds())
	}
	gwIP, gw, err := spec.ip(1)
	if err != nil {
		return err
	}
	l.gateway = gwIP
	if err := checkNetworksFree(spec); err != nil {
		return err
	}
	if err := l.Network(ctx, gw); err != nil {
		return err
	}
	for _, a := range spec.BridgeAddrs {
		if _, err := run(ctx, "ip", "addr", "replace", a, "dev", l.bridge); err != nil {
			return fmt.Errorf("lab: bridge address %s: %w", a, err)
		}
	}
	say("bridge %s up at %s", l.bridge, strings.Join(append([]string{gw}, spec.BridgeAddrs...), ", "))
	if err := l.writeShare(); err != nil {
		return err
	}
	var etcHosts []string
	for _, hs := range spec.Hosts {
		ip, _, err := spec.ip(hs.Octet)
		if err != nil {
			return err
		}
		etcHosts = append(etcHosts, ip+" "+hs.Name)
	}
	for _, hs := range spec.Hosts {
		_, cidr, err := spec.ip(hs.Octet)
		if err != nil {
			return err
		}
		began := time.Now()
		if _, err := l.AddHost(ctx, hs.Name, cidr, etcHosts); err != nil {
			return err
		}
		say("host %-13s booted (systemd running) in %.1fs, eth0 %s", hs.Name, time.Since(began).Seconds(), cidr)
		if hs.Name == CephHost {
			// What a real storage host has before Plinth arrives: a Ceph cluster.
			began = time.Now()
			h := l.Host(hs.Name)
			bctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			_, err := labceph.Bootstrap(bctx, h.Machine.Exec, h.IP, h.Name)
			cancel()
			if err != nil {
				return fmt.Errorf("lab: %w", err)
			}
			say("host %-13s one-node Ceph cluster (ceph-mon@, ceph-mgr@, ceph-osd@0 units) healthy in %.1fs", hs.Name, time.Since(began).Seconds())
		}
	}
	var first *Host
	var joinAddrs []string
	for _, kind := range []string{"init", "join", "witness", ""} {
		for _, hs := range spec.Hosts {
			if hs.Coordinator != kind {
				continue
			}
			h := l.Host(hs.Name)
			began := time.Now()
			args := []string{"--bundle", BundleMount, "--name", h.Name, "--agent-config", ShareMount + "/agent.yaml"}
			switch kind {
			case "init":
				args = append(args, "--init", "--site", spec.Site, "--bind", h.IP, "--profile", l.Profile, "--role", hs.Role)
			case "join", "witness":
				as := map[string]string{"join": "controller", "witness": "witness"}[kind]
				tok, err := l.tokenFile(ctx, h.Name, map[string]string{"join": "coordinator", "witness": "witness"}[kind])
				if err != nil {
					return err
				}
				atok, err := l.tokenFile(ctx, h.Name, hs.Role)
				if err != nil {
					return err
				}
				args = append(args, "--join", as, "--bind", h.IP, "--profile", l.Profile, "--coordinator", first.IP,
					"--token-file", tok, "--agent-token-file", atok)
			default:
				tok, err := l.tokenFile(ctx, h.Name, hs.Role)
				if err != nil {
					return err
				}
				args = append(args, "--agent", "--coordinator", strings.Join(joinAddrs, ","), "--token-file", tok)
			}
			if err := l.install(ctx, h, args...); err != nil {
				return err
			}
			if kind != "" {
				c := &Coordinator{Name: h.Name, IP: h.IP, Port: CoordinatorPort, Witness: kind == "witness", NS: h.NS, Host: h, lab: l}
				l.mu.Lock()
				l.coords = append(l.coords, c)
				l.mu.Unlock()
				if kind == "init" {
					first = h
					if err := l.copyAdminIdentity(h); err != nil {
						return err
					}
				}
				if err := l.writeIdentityAddrs(); err != nil {
					return err
				}
				if err := l.WaitReady(ctx, c, 60*time.Second); err != nil {
					return err
				}
				if kind != "witness" {
					joinAddrs = append(joinAddrs, h.IP)
				}
				say("host %-13s install.sh --%s: coordinator and agent running (%.1fs)", h.Name, map[string]string{"init": "init", "join": "join controller", "witness": "join witness"}[kind], time.Since(began).Seconds())
			} else {
				say("host %-13s install.sh --agent: agent enrolled and running (%.1fs)", h.Name, time.Since(began).Seconds())
			}
		}
	}
	if spec.Manifest != "" {
		out, err := l.Apply(ctx, spec.Manifest)
		if err != nil {
			return err
		}
		say("applied %s:\n%s", spec.Manifest, strings.TrimRight(out, "\n"))
	}
	return nil
}

// Apply applies a site manifest with the lab's bundle filled in (the filled-in copy
// is in Dir, under the manifest's name) and returns what the CLI printed.
func (l *Lab) Apply(ctx context.Context, manifest string) (string, error) {
	m, err := l.withBundle(manifest)
	if err != nil {
		return "", err
	}
	return l.CLI(ctx, "apply", "-f", m)
}

// WaitSiteReady follows the site with blocking queries and prints a host × step
// table whenever it changes, until the Site is Ready or timeout passes.
func (l *Lab) WaitSiteReady(ctx context.Context, progress io.Writer, timeout time.Duration) error {
	cl, err := l.Client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var idx uint64
	last := ""
	for {
		var steps []plan.Record
		next, err := cl.Do(ctx, "GET", client.Blocking("/v1/steps", idx, 5*time.Second), nil, &steps)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("lab: site not Ready within %s; last seen:\n%s", timeout, last)
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		idx = next
		var hosts []state.HostRecord
		var site *state.SiteRecord
		// Consistent reads: a lagging follower must not report a stale Ready.
		_, herr := cl.Do(ctx, "GET", "/v1/hosts?consistent", nil, &hosts)
		_, serr := cl.Do(ctx, "GET", "/v1/site?consistent", nil, &site)
		if herr != nil || serr != nil {
			continue
		}
		table := ProgressTable(hosts, steps, site) + failures(steps)
		if table != last && progress != nil {
			fmt.Fprintf(progress, "\n%s\n%s", time.Now().Format("15:04:05"), table)
		}
		last = table
		if site != nil {
			if r := plan.Find(site.Site.Status.Conditions, api.ConditionReady); r != nil && r.Status == api.ConditionTrue {
				return nil
			}
		}
	}
}

// failures lists the last error of every failed or blocked step, for a timeout's
// message.
func failures(steps []plan.Record) string {
	var b strings.Builder
	for _, s := range steps {
		if (s.State == plan.Failed || s.State == plan.Blocked) && s.LastResult != nil {
			fmt.Fprintf(&b, "%s: %s\n", s.ID, clipLine(s.LastResult.Error, 400))
		}
	}
	return b.String()
}

func clipLine(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// ProgressTable renders hosts as rows and step kinds as columns.
func ProgressTable(hosts []state.HostRecord, steps []plan.Record, site *state.SiteRecord) string {
	kinds := map[string]bool{}
	cell := map[[2]string]string{}
	for _, s := range steps {
		kind, _, _ := strings.Cut(s.Kind, "/")
		kinds[kind] = true
		v := string(s.State)
		if s.State == plan.Failed || s.State == plan.Blocked {
			v += fmt.Sprintf("(%d)", s.Attempts)
		}
		k := [2]string{s.Host, kind}
		if prev, ok := cell[k]; ok && prev != v {
			v = prev + "," + v
		}
		cell[k] = v
	}
	cols := make([]string, 0, len(kinds))
	for k := range kinds {
		cols = append(cols, k)
	}
	sort.Strings(cols)
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "HOST\tREACHABLE")
	for _, c := range cols {
		fmt.Fprint(tw, "\t"+c)
	}
	fmt.Fprintln(tw, "\tREADY")
	for _, h := range hosts {
		fmt.Fprintf(tw, "%s\t%s", h.Name, dash(h.Reachable))
		for _, c := range cols {
			fmt.Fprint(tw, "\t"+dash(cell[[2]string{h.Name, c}]))
		}
		ready := "-"
		if r := plan.Find(h.Host.Status.Conditions, api.ConditionReady); r != nil {
			ready = r.Status
			if r.Status != api.ConditionTrue {
				ready += " (" + r.Reason + ")"
			}
		}
		fmt.Fprintf(tw, "\t%s\n", ready)
	}
	tw.Flush()
	if site != nil {
		if r := plan.Find(site.Site.Status.Conditions, api.ConditionReady); r != nil {
			fmt.Fprintf(&b, "site %s: Ready=%s %s\n", site.Site.Metadata.Name, r.Status, r.Message)
		}
	}
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// CheckRoot explains why the lab cannot run when not root.
func CheckRoot() error {
	if os.Geteuid() != 0 {
		return errors.New("lab: needs root (it boots hosts with systemd-nspawn and creates network namespaces, veth pairs and a bridge)")
	}
	return nil
}
