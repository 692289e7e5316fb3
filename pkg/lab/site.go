package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/labhost"
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
}

// DefaultSpec is the lab of examples/lab/site.yaml: two controllers and a witness
// running coordinators, and a compute host; every host runs an agent.
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
		},
	}
}

// CoordinatorPort is the API port coordinators use in the lab (join, raft and
// gossip take the next three).
const CoordinatorPort = 7440

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

// Up builds the whole lab: bridge, host namespaces, coordinators, enrolled agents,
// and the applied manifest. It does not wait for convergence: see WaitReady.
func (l *Lab) Up(ctx context.Context, spec Spec, progress io.Writer) error {
	say := func(format string, args ...any) {
		if progress != nil {
			fmt.Fprintf(progress, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
		}
	}
	_, gw, err := spec.ip(1)
	if err != nil {
		return err
	}
	if err := l.Network(ctx, gw); err != nil {
		return err
	}
	say("bridge %s up at %s", l.bridge, gw)
	for _, hs := range spec.Hosts {
		_, cidr, err := spec.ip(hs.Octet)
		if err != nil {
			return err
		}
		if _, err := l.AddHost(ctx, hs.Name, cidr); err != nil {
			return err
		}
		say("host %-13s namespace %s, eth0 %s", hs.Name, l.Host(hs.Name).NS, cidr)
	}
	for _, kind := range []string{"init", "join", "witness"} {
		for _, hs := range spec.Hosts {
			if hs.Coordinator != kind {
				continue
			}
			h := l.Host(hs.Name)
			if kind == "init" {
				if _, err := l.InitCoordinator(ctx, hs.Name, h.NS, h.IP, CoordinatorPort, spec.Site); err != nil {
					return err
				}
			} else if _, err := l.JoinCoordinator(ctx, hs.Name, h.NS, h.IP, CoordinatorPort, kind == "witness"); err != nil {
				return err
			}
			say("coordinator %s (%s) serving on %s", hs.Name, kind, net.JoinHostPort(h.IP, fmt.Sprint(CoordinatorPort)))
		}
	}
	for _, hs := range spec.Hosts {
		h := l.Host(hs.Name)
		for _, svc := range registeredServices() {
			args, err := svc.fn(ctx, l, h, hs)
			if errors.Is(err, ErrServiceUnavailable) {
				say("host %-13s %s: not available here: %v", hs.Name, svc.name, err)
				continue
			}
			if err != nil {
				return fmt.Errorf("lab: host %s: %s: %w", hs.Name, svc.name, err)
			}
			h.AgentArgs = append(h.AgentArgs, args...)
		}
		if err := l.EnrolAgent(ctx, h, hs.Role); err != nil {
			return err
		}
		if err := l.StartAgent(h); err != nil {
			return err
		}
		say("agent %-13s enrolled with a one-time token and running", hs.Name)
	}
	if spec.Manifest != "" {
		out, err := l.CLI(ctx, "apply", "-f", spec.Manifest)
		if err != nil {
			return err
		}
		say("applied %s:\n%s", spec.Manifest, strings.TrimRight(out, "\n"))
	}
	return nil
}

// WaitSiteReady follows the site with blocking queries and prints a host × step table
// whenever it changes, until the Site is Ready or timeout passes. It also returns,
// with ready false, once every step that can run in the lab is done and the rest
// cannot run on namespace hosts (see LabRefused).
func (l *Lab) WaitSiteReady(ctx context.Context, progress io.Writer, timeout time.Duration) (ready bool, err error) {
	cl, err := l.Client()
	if err != nil {
		return false, err
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
				return false, fmt.Errorf("lab: site not Ready within %s; last seen:\n%s", timeout, last)
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
		table := ProgressTable(hosts, steps, site)
		if table != last && progress != nil {
			fmt.Fprintf(progress, "\n%s\n%s", time.Now().Format("15:04:05"), table)
			last = table
		}
		if site != nil {
			if r := plan.Find(site.Site.Status.Conditions, api.ConditionReady); r != nil && r.Status == api.ConditionTrue {
				return true, nil
			}
		}
		if lab := LabRefused(steps); len(lab) > 0 && settledInLab(hosts, steps, lab) {
			if progress != nil {
				fmt.Fprintf(progress, "\nEvery step that can run in the lab is done; %d cannot run on namespace hosts (%s)\nand are shown as n/a: they are never reported done. The site stays not Ready.\n",
					len(lab), strings.Join(kindsOf(steps, lab), ", "))
			}
			return false, nil
		}
	}
}

// LabRefused returns the IDs of steps that cannot run on lab hosts: those Blocked
// with labhost.Reason, and those waiting, directly or not, on one of them.
func LabRefused(steps []plan.Record) map[string]bool {
	out := map[string]bool{}
	for _, s := range steps {
		if s.State == plan.Blocked && s.LastResult != nil && strings.Contains(s.LastResult.Error, labhost.Reason) {
			out[s.ID] = true
		}
	}
	for grew := len(out) > 0; grew; {
		grew = false
		for _, s := range steps {
			if out[s.ID] || (s.State != plan.Pending && s.State != plan.Ready) {
				continue
			}
			for _, d := range s.Deps {
				if out[d] {
					out[s.ID], grew = true, true
					break
				}
			}
		}
	}
	return out
}

// settledInLab reports whether every host is reachable and every step is done or
// cannot run in the lab.
func settledInLab(hosts []state.HostRecord, steps []plan.Record, lab map[string]bool) bool {
	for _, h := range hosts {
		if h.Declared && h.Reachable != api.ConditionTrue {
			return false
		}
	}
	for _, s := range steps {
		if s.State != plan.Succeeded && !lab[s.ID] {
			return false
		}
	}
	return true
}

func kindsOf(steps []plan.Record, ids map[string]bool) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range steps {
		if ids[s.ID] && !seen[s.Kind] {
			seen[s.Kind] = true
			out = append(out, s.Kind)
		}
	}
	sort.Strings(out)
	return out
}

// ProgressTable renders hosts as rows and step kinds as columns. Steps that cannot
// run in the lab show as n/a.
func ProgressTable(hosts []state.HostRecord, steps []plan.Record, site *state.SiteRecord) string {
	kinds := map[string]bool{}
	cell := map[[2]string]string{}
	lab := LabRefused(steps)
	for _, s := range steps {
		kind, _, _ := strings.Cut(s.Kind, "/")
		kinds[kind] = true
		v := string(s.State)
		if s.State == plan.Failed || s.State == plan.Blocked {
			v += fmt.Sprintf("(%d)", s.Attempts)
		}
		if lab[s.ID] {
			v = "n/a"
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
		return errors.New("lab: needs root (it creates network namespaces, veth pairs and a bridge)")
	}
	return nil
}
