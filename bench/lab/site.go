package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/lab"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/state"
)

// bench is one lab site of booted hosts and what the measurements need to drive it.
type bench struct {
	o      options
	dir    string
	l      *lab.Lab
	spec   lab.Spec
	n      int    // management subnet 10.n.0.0/24; data 10.n+1; routes to 10.n+2
	prefix string // names every namespace and link of this lab
	cl     *client.Client
	// octet is compute-0's current data address octet; change runs alternate it.
	octet int
}

// The host whose data address the change runs alternate, and the agent they kill.
const target = "compute-0"

func newBench(ctx context.Context, o options, dir string) (*bench, error) {
	n, err := pickSubnet(ctx)
	if err != nil {
		return nil, err
	}
	prefix, err := pickPrefix(ctx)
	if err != nil {
		return nil, err
	}
	spec := lab.DefaultSpec("") // no manifest: the first apply is measured
	spec.Subnet = fmt.Sprintf("10.%d.0.0/24", n)
	// The bench's manifest has no cluster-host network, and a fixed bridge address
	// would collide with another lab's: the bridge gets the management gateway only.
	spec.BridgeAddrs = nil
	l := lab.New(filepath.Join(dir, "lab"), o.bin, prefix)
	l.RuncWrapper = o.runcWrapper
	b := &bench{o: o, dir: dir, l: l, spec: spec, n: n, prefix: prefix}
	for _, h := range spec.Hosts {
		if h.Name == target {
			b.octet = h.Octet
		}
	}
	return b, nil
}

// pickSubnet chooses n so that 10.n.0.0/24 .. 10.n+2.0.0/24 overlap no route or
// address in the root namespace. Only the management /24 is routed there (the lab
// bridge); the other two live inside the host namespaces, but stay clear anyway.
// The range 20..97 keeps away from test/e2e's labs (10.100..10.219).
func pickSubnet(ctx context.Context) (int, error) {
	var used []*net.IPNet
	for _, args := range [][]string{{"-j", "-4", "route", "show", "table", "all"}, {"-j", "-4", "addr"}} {
		out, err := exec.CommandContext(ctx, "ip", args...).Output()
		if err != nil {
			return 0, fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
		}
		var rows []struct {
			Dst      string `json:"dst"`
			AddrInfo []struct {
				Local     string `json:"local"`
				Prefixlen int    `json:"prefixlen"`
			} `json:"addr_info"`
		}
		if err := json.Unmarshal(out, &rows); err != nil {
			return 0, fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
		}
		add := func(s string) {
			if s == "" || s == "default" {
				return
			}
			if !strings.Contains(s, "/") {
				s += "/32"
			}
			if _, nw, err := net.ParseCIDR(s); err == nil {
				used = append(used, nw)
			}
		}
		for _, r := range rows {
			add(r.Dst)
			for _, a := range r.AddrInfo {
				add(fmt.Sprintf("%s/%d", a.Local, a.Prefixlen))
			}
		}
	}
	overlaps := func(a, b *net.IPNet) bool { return a.Contains(b.IP) || b.Contains(a.IP) }
	for range 200 {
		n := 20 + 3*rand.IntN(26)
		free := true
		for k := range 3 {
			_, cand, _ := net.ParseCIDR(fmt.Sprintf("10.%d.0.0/24", n+k))
			for _, u := range used {
				if overlaps(cand, u) {
					free = false
				}
			}
		}
		if free {
			return n, nil
		}
	}
	return 0, fmt.Errorf("no free 10.x.0.0/24 subnet in 10.20-10.97")
}

// pickPrefix chooses "pb" + 6 digits, unused by any namespace or link.
func pickPrefix(ctx context.Context) (string, error) {
	links, _ := exec.CommandContext(ctx, "ip", "-o", "link").Output()
	nss, _ := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	for range 100 {
		p := fmt.Sprintf("pb%06d", rand.IntN(1e6))
		if !strings.Contains(string(links), p) && !strings.Contains(string(nss), p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("no unused lab prefix")
}

// manifest renders the lab site like test/e2e's labManifest: management 10.n/24,
// data 10.n+1/24 (MTU 9000) with compute-0's data address octet set to octet, a
// route to 10.n+2/24, and the e2e policy (drift repair every 2 s).
func (b *bench) manifest(octet int) string {
	n := b.n
	var s strings.Builder
	fmt.Fprintf(&s, `apiVersion: plinth.dev/v1alpha1
kind: Site
metadata:
  name: %s
spec:
  controllers: [controller-0, controller-1]
  witness: witness
  policy: {drift: repair, driftCheckSeconds: 2, retryBaseSeconds: 1, retryMaxSeconds: 5}
  networks:
  - {name: mgmt, role: mgmt, cidr: 10.%d.0.0/24}
  - {name: data, role: data, cidr: 10.%d.0.0/24, mtu: 9000}
`, b.spec.Site, n, n+1)
	for _, h := range b.spec.Hosts {
		o := h.Octet
		if h.Name == target {
			o = octet
		}
		role := "controller"
		if h.Role == "worker" {
			role = "worker"
		}
		fmt.Fprintf(&s, `---
apiVersion: plinth.dev/v1alpha1
kind: Host
metadata: {name: %s}
spec:
  roles: [%s]
  managementAddress: 10.%d.0.%d
  interfaces:
  - {name: data0, networks: [data], addresses: [10.%d.0.%d/24]}
  routes:
  - {to: 10.%d.0.0/24, via: 10.%d.0.254}
`, h.Name, role, n, h.Octet, n+1, o, n+2, n+1)
	}
	return s.String()
}

func say(format string, args ...any) {
	fmt.Printf("%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// applyResult is one timed apply.
type applyResult struct {
	label    string
	cli      time.Duration // `plinth-coordinator apply` process, start to exit (commit)
	observed time.Duration // apply start -> WaitSiteReady returned (consistent reads)
	recorded time.Duration // apply start -> the site's Ready lastTransitionTime
	reran    []string      // hosts whose steps ran again (change runs)
	steps    int           // steps that ran
	failures int           // StepFailed events between the apply and Ready
	firstErr string        // the first of them
}

func (b *bench) progress() io.Writer {
	if b.o.verbose {
		return os.Stdout
	}
	return nil
}

// timedApply applies yaml through the CLI and waits for Site Ready.
func (b *bench) timedApply(ctx context.Context, label, yaml string) (applyResult, error) {
	r := applyResult{label: label}
	f := filepath.Join(b.dir, fmt.Sprintf("site-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
		return r, err
	}
	before, err := b.steps(ctx)
	if err != nil {
		return r, err
	}
	lastEvent, err := b.lastEventID(ctx)
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	if out, err := b.l.CLI(ctx, "apply", "-f", f); err != nil {
		return r, fmt.Errorf("%s: %w %s", label, err, out)
	}
	r.cli = time.Since(t0)
	if err := b.l.WaitSiteReady(ctx, b.progress(), b.o.readyWait); err != nil {
		return r, fmt.Errorf("%s: %w", label, err)
	}
	r.observed = time.Since(t0)
	var site *state.SiteRecord
	if _, err := b.cl.Do(ctx, "GET", "/v1/site?consistent", nil, &site); err == nil && site != nil {
		if c := plan.Find(site.Site.Status.Conditions, api.ConditionReady); c != nil && c.Status == api.ConditionTrue {
			r.recorded = c.LastTransitionTime.Sub(t0)
		}
	}
	after, err := b.steps(ctx)
	if err != nil {
		return r, err
	}
	hosts := map[string]bool{}
	for id, a := range after {
		p, had := before[id]
		if !had || !a.FinishedAt.Equal(p.FinishedAt) || a.InputsHash != p.InputsHash {
			hosts[a.Host] = true
			r.steps++
		}
	}
	for h := range hosts {
		r.reran = append(r.reran, h)
	}
	sort.Strings(r.reran)
	// Failed attempts (retried after the policy's retryBaseSeconds) are part of the
	// time to Ready: count them so the figure can be read.
	var evs []state.Event
	if _, err := b.cl.Do(ctx, "GET", fmt.Sprintf("/v1/events?consistent&after=%d", lastEvent), nil, &evs); err != nil {
		return r, err
	}
	for _, e := range evs {
		if e.Reason == "StepFailed" || e.Reason == "StepBlocked" {
			if r.failures == 0 {
				r.firstErr = e.Message
			}
			r.failures++
		}
	}
	return r, nil
}

func (b *bench) lastEventID(ctx context.Context) (uint64, error) {
	var evs []state.Event
	if _, err := b.cl.Do(ctx, "GET", "/v1/events?consistent", nil, &evs); err != nil {
		return 0, err
	}
	var id uint64
	for _, e := range evs {
		id = max(id, e.ID)
	}
	return id, nil
}

// attempts describes failed attempts for the progress lines.
func (r applyResult) attempts() string {
	if r.failures == 0 {
		return "no failed attempts"
	}
	return fmt.Sprintf("%d failed attempt(s) first: %s", r.failures, r.firstErr)
}

func (b *bench) steps(ctx context.Context) (map[string]plan.Record, error) {
	var steps []plan.Record
	if _, err := b.cl.Do(ctx, "GET", "/v1/steps?consistent", nil, &steps); err != nil {
		return nil, err
	}
	m := map[string]plan.Record{}
	for _, s := range steps {
		m[s.ID] = s
	}
	return m, nil
}

func (b *bench) firstApply(ctx context.Context) (applyResult, error) {
	r, err := b.timedApply(ctx, "first apply", b.manifest(b.octet))
	if err != nil {
		return r, err
	}
	say("first apply: Ready after %s (CLI %s; site Ready recorded at +%s); %d steps ran on %s; %s",
		ms(r.observed), ms(r.cli), ms(r.recorded), r.steps, strings.Join(r.reran, ","), r.attempts())
	return r, nil
}

// changeApply moves compute-0's data address between .31 and its original octet, so
// exactly one host.network step has new inputs.
func (b *bench) changeApply(ctx context.Context, i int) (applyResult, error) {
	orig := 0
	for _, h := range b.spec.Hosts {
		if h.Name == target {
			orig = h.Octet
		}
	}
	next := 31
	if b.octet == 31 {
		next = orig
	}
	label := fmt.Sprintf("change %d: %s data 10.%d.0.%d -> .%d", i+1, target, b.n+1, b.octet, next)
	r, err := b.timedApply(ctx, label, b.manifest(next))
	if err != nil {
		return r, err
	}
	b.octet = next
	say("%s: Ready after %s (CLI %s; site Ready recorded at +%s); re-ran %d step(s) on [%s]; %s",
		label, ms(r.observed), ms(r.cli), ms(r.recorded), r.steps, strings.Join(r.reran, ","), r.attempts())
	return r, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
}

// printDiagnostics shows, after a failure, the end of every install log and of each
// host's Plinth journals.
func (b *bench) printDiagnostics(ctx context.Context) {
	dir := filepath.Join(b.l.Dir, "logs")
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		fmt.Fprintf(os.Stderr, "==== %s (tail)\n%s\n", e.Name(), tailLines(string(data), 15))
	}
	for _, h := range b.l.Hosts() {
		if h.Machine == nil || !h.Machine.Running() {
			continue
		}
		out, err := b.l.Exec(ctx, h, "journalctl", "-u", "plinth-agent", "-u", "plinth-coordinator", "-n", "20", "--no-pager")
		if err != nil {
			out += err.Error()
		}
		fmt.Fprintf(os.Stderr, "==== %s: journalctl -u plinth-agent -u plinth-coordinator (tail)\n%s\n", h.Name, tailLines(out, 20))
	}
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
