package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/plinth-dev/plinth/pkg/kubeinstall"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
	"github.com/plinth-dev/plinth/pkg/lab"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// The -kube run (make bench-kube): the lab's own site (examples/lab/site.yaml, on the
// demo's addresses) applied to enrolled, idle agents until every node is Ready, per
// phase; memory per host with the cluster up; then the floor: on the same hosts, with
// Plinth's agents stopped and the cluster it built taken apart (kubeadm reset, etcd
// emptied), the same kubeadm init and joins with the same configuration files, run
// directly as a script would, and the same flannel manifest applied. Plinth's time
// is printed as a ratio to the floor.

// kubePhases are the reported phases in bootstrap order, by step kind.
var kubePhases = []struct{ name, kind string }{
	{"containerd", "containerd.config"},
	{"images", "images.import"},
	{"binaries", kubespec.KindBinaries},
	{"etcd", kubespec.KindEtcd},
	{"vip", kubespec.KindVIP},
	{"init", kubespec.KindInit},
	{"control-plane join", kubespec.KindJoinControlPlane},
	{"worker joins", kubespec.KindJoin},
	{"cni", kubespec.KindCNI},
	{"labels", kubespec.KindLabels},
	{"health", kubespec.KindHealth},
}

type kubeResult struct {
	siteReady  time.Duration // apply -> Site Ready
	nodesReady time.Duration // apply -> the last node's Ready transition
	fromInit   time.Duration // first kube.init start -> the last node's Ready transition
	floor      floorResult
}

type floorResult struct {
	init, joins, cni, ready, total time.Duration
}

func runKube(ctx context.Context, o options) error {
	return withLab(ctx, o, func(b *bench) error {
		fmt.Println("\n== 0. the lab up to every host enrolled")
		if _, err := b.up(ctx); err != nil {
			return err
		}
		fmt.Println("\n== 1. apply " + o.manifest + " -> every node Ready")
		var r kubeResult
		applied := time.Now()
		if out, err := b.l.Apply(ctx, o.manifest); err != nil {
			return fmt.Errorf("apply: %w: %s", err, out)
		}
		var progress io.Writer
		if o.verbose {
			progress = os.Stdout
		}
		if err := b.l.WaitSiteReady(ctx, progress, o.readyWait); err != nil {
			return err
		}
		r.siteReady = time.Since(applied)
		kubeconfig, kubectl, ok, err := b.l.Kubeconfig(ctx)
		if err != nil || !ok {
			return fmt.Errorf("kubeconfig: ok=%v %v", ok, err)
		}
		k := kubectlFunc(ctx, kubeconfig, kubectl)
		last, err := lastNodeReady(k)
		if err != nil {
			return err
		}
		r.nodesReady = last.Sub(applied.Truncate(time.Second))
		var steps []plan.Record
		if _, err := b.cl.Do(ctx, "GET", "/v1/steps", nil, &steps); err != nil {
			return err
		}
		if first := phaseStart(steps, kubespec.KindInit); !first.IsZero() {
			r.fromInit = last.Sub(first.Truncate(time.Second))
		}
		printPhases(steps, applied)
		printNodesReady(k, applied)
		printCriticalPath(steps, applied)
		for _, st := range steps {
			if st.Kind == kubespec.KindHealth && st.LastResult != nil && len(st.LastResult.Changes) > 0 {
				fmt.Printf("kube.health waited for: %s\n", strings.Join(st.LastResult.Changes, "; "))
			}
		}
		mem, err := b.memory()
		if err != nil {
			return err
		}
		printMemory("with the cluster Ready", mem)

		fmt.Println("\n== 2. the floor: the same kubeadm init and joins run directly on the same hosts")
		if r.floor, err = b.kubeadmFloor(ctx, steps, k); err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		printKube(r)
		return nil
	})
}

func kubectlFunc(ctx context.Context, kubeconfig, kubectl string) func(args ...string) (string, error) {
	return func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kubeconfig, "--request-timeout", "10s"}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
}

// nodesReady returns each node's Ready status and when it last changed.
func nodesReady(k func(...string) (string, error)) (map[string]bool, time.Time, error) {
	out, err := k("get", "nodes", "-o", "json")
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("kubectl get nodes: %w: %s", err, out)
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Status   struct {
				Conditions []struct {
					Type, Status       string
					LastTransitionTime time.Time
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, time.Time{}, err
	}
	ready := map[string]bool{}
	var last time.Time
	for _, n := range list.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == "Ready" {
				ready[n.Metadata.Name] = c.Status == "True"
				if c.LastTransitionTime.After(last) {
					last = c.LastTransitionTime
				}
			}
		}
	}
	return ready, last, nil
}

// printCriticalPath walks back from kube.health through, at each step, the
// dependency that finished last: the chain that decided when the site was done.
func printCriticalPath(steps []plan.Record, applied time.Time) {
	byID := map[string]plan.Record{}
	var cur string
	for _, s := range steps {
		byID[s.ID] = s
		if s.Kind == kubespec.KindHealth {
			cur = s.ID
		}
	}
	fmt.Println("critical path (each step's last-finishing dependency), from the apply:")
	var chain []plan.Record
	for cur != "" {
		s := byID[cur]
		chain = append(chain, s)
		cur = ""
		var last time.Time
		for _, d := range s.Deps {
			if f := byID[d].FinishedAt; f.After(last) {
				last, cur = f, d
			}
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		s := chain[i]
		fmt.Printf("  %-42s start +%5.1fs  finish +%5.1fs\n", s.ID, s.StartedAt.Sub(applied).Seconds(), s.FinishedAt.Sub(applied).Seconds())
	}
}

// printNodesReady prints when each node's Ready condition last turned, from the apply.
func printNodesReady(k func(...string) (string, error), applied time.Time) {
	out, err := k("get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name}{" "}{.metadata.creationTimestamp}{" "}{.status.conditions[?(@.type=="Ready")].lastTransitionTime}{"\n"}{end}`)
	if err != nil {
		return
	}
	fmt.Println("nodes (registered, Ready), from the apply:")
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		reg, _ := time.Parse(time.RFC3339, f[1])
		ready, _ := time.Parse(time.RFC3339, f[2])
		base := applied.Truncate(time.Second)
		fmt.Printf("  %-13s registered +%.0fs, Ready +%.0fs\n", f[0], reg.Sub(base).Seconds(), ready.Sub(base).Seconds())
	}
}

func lastNodeReady(k func(...string) (string, error)) (time.Time, error) {
	ready, last, err := nodesReady(k)
	if err != nil {
		return time.Time{}, err
	}
	for n, ok := range ready {
		if !ok {
			return time.Time{}, fmt.Errorf("node %s is not Ready although the Site is", n)
		}
	}
	return last, nil
}

func phaseStart(steps []plan.Record, kind string) time.Time {
	var first time.Time
	for _, s := range steps {
		if s.Kind == kind && !s.StartedAt.IsZero() && (first.IsZero() || s.StartedAt.Before(first)) {
			first = s.StartedAt
		}
	}
	return first
}

// printPhases prints, per phase, when its first step started and its last finished
// (offsets from the apply) and the longest single step. A retried step's start is
// its last run's.
func printPhases(steps []plan.Record, applied time.Time) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "phase\tsteps\tfirst start\tlast finish\tspan\tlongest step\t")
	off := func(t time.Time) string { return fmt.Sprintf("+%.1fs", t.Sub(applied).Seconds()) }
	for _, p := range kubePhases {
		var first, last time.Time
		var longest time.Duration
		n := 0
		for _, s := range steps {
			if s.Kind != p.kind || s.StartedAt.IsZero() || s.FinishedAt.IsZero() {
				continue
			}
			n++
			if first.IsZero() || s.StartedAt.Before(first) {
				first = s.StartedAt
			}
			if s.FinishedAt.After(last) {
				last = s.FinishedAt
			}
			longest = max(longest, s.FinishedAt.Sub(s.StartedAt))
		}
		if n == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.1fs\t%.1fs\t\n", p.name, n, off(first), off(last), last.Sub(first).Seconds(), longest.Seconds())
	}
	tw.Flush()
}

// kubeadmFloor takes the cluster apart and builds it again with kubeadm alone, timed.
func (b *bench) kubeadmFloor(ctx context.Context, steps []plan.Record, k func(...string) (string, error)) (floorResult, error) {
	var r floorResult
	var initHost string
	var joins []string
	var cluster kubespec.Cluster
	var cni kubespec.CNIInputs
	for _, s := range steps {
		switch s.Kind {
		case kubespec.KindInit:
			initHost = s.Host
			var in kubespec.InitInputs
			if err := json.Unmarshal(s.Inputs, &in); err != nil {
				return r, fmt.Errorf("kube.init inputs: %w", err)
			}
			cluster = in.Cluster
		case kubespec.KindJoin, kubespec.KindJoinControlPlane:
			joins = append(joins, s.Host)
		case kubespec.KindCNI:
			if err := json.Unmarshal(s.Inputs, &cni); err != nil {
				return r, fmt.Errorf("kube.cni inputs: %w", err)
			}
		}
	}
	if initHost == "" || cni.Flannel == nil {
		return r, fmt.Errorf("the site has no kube.init or no flannel kube.cni step")
	}
	manifest, err := kubeinstall.FlannelManifest(*cni.Flannel)
	if err != nil {
		return r, err
	}
	flannel := filepath.Join(b.dir, "flannel.yaml")
	if err := os.WriteFile(flannel, manifest, 0o600); err != nil {
		return r, err
	}
	slices.Sort(joins)
	nodes := append([]string{initHost}, joins...)
	sh := func(host, script string) error {
		out, err := b.l.Exec(ctx, b.l.Host(host), "sh", "-ec", script)
		if err != nil {
			return fmt.Errorf("%s: %w: %s", host, err, strings.TrimSpace(out))
		}
		return nil
	}

	// Untimed: Plinth steps aside and the cluster goes, the CA kept so that the join
	// files (which pin its hash) stay valid.
	t := time.Now()
	for _, h := range b.l.Hosts() {
		if err := sh(h.Name, "systemctl stop plinth-agent"); err != nil {
			return r, err
		}
	}
	if err := sh(initHost, "rm -rf /root/floor-pki && cp -a /etc/kubernetes/pki /root/floor-pki"); err != nil {
		return r, err
	}
	for _, n := range nodes {
		if err := sh(n, "kubeadm reset --force --cri-socket "+cluster.CRISocket+" >/dev/null 2>&1; "+
			"rm -rf /etc/cni/net.d/* /run/flannel /var/lib/cni; ip link del cni0 2>/dev/null || true; ip link del flannel.1 2>/dev/null || true; "+
			// What kubeadm reset leaves to kube-proxy --cleanup: its nftables tables.
			"nft delete table ip kube-proxy 2>/dev/null || true; nft delete table ip6 kube-proxy 2>/dev/null || true"); err != nil {
			return r, err
		}
	}
	pki := "/etc/plinth/etcd/pki/"
	if err := sh(initHost, fmt.Sprintf("etcdctl --endpoints %s --cacert %sca.crt --cert %sapiserver-etcd-client.crt --key %sapiserver-etcd-client.key del '' --from-key >/dev/null",
		strings.Join(cluster.EtcdEndpoints, ","), pki, pki, pki)); err != nil {
		return r, err
	}
	if err := sh(initHost, "rm -rf /etc/kubernetes/pki && cp -a /root/floor-pki /etc/kubernetes/pki"); err != nil {
		return r, err
	}
	say("floor: Plinth's agents stopped, kubeadm reset on %s, etcd emptied (%.1fs, untimed)", strings.Join(nodes, ", "), time.Since(t).Seconds())

	// Timed: what a script does.
	start := time.Now()
	if err := sh(initHost, "kubeadm init --config /etc/plinth/kubeadm/init.yaml --upload-certs >/dev/null"); err != nil {
		return r, err
	}
	// A script, too, must wait for the endpoint the joins use: keepalived moves the VIP
	// back to the controller whose API server answers.
	for {
		out, err := k("get", "--raw", "/readyz")
		if err == nil {
			break
		}
		if time.Since(start) > b.o.readyWait {
			return r, fmt.Errorf("the API does not answer through %s: %v %s", cluster.Endpoint, err, out)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return r, err
		}
	}
	r.init = time.Since(start)
	say("floor: kubeadm init on %s, then the API through %s: %.1fs", initHost, cluster.Endpoint, r.init.Seconds())
	var wg sync.WaitGroup
	errs := make([]error, len(joins)+1)
	for i, n := range joins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = sh(n, "kubeadm join --config /etc/plinth/kubeadm/join.yaml >/dev/null")
		}()
	}
	t = time.Now()
	if out, err := k("apply", "-f", flannel); err != nil {
		errs[len(joins)] = fmt.Errorf("kubectl apply flannel: %w: %s", err, out)
	}
	r.cni = time.Since(t)
	wg.Wait()
	r.joins = time.Since(start) - r.init
	for _, err := range errs {
		if err != nil {
			return r, err
		}
	}
	say("floor: joins of %s and the flannel apply %.1fs", strings.Join(joins, ", "), r.joins.Seconds())
	for {
		ready, _, err := nodesReady(k)
		n := 0
		for _, ok := range ready {
			if ok {
				n++
			}
		}
		if err == nil && n == len(nodes) {
			break
		}
		if time.Since(start) > b.o.readyWait {
			for _, args := range [][]string{
				{"get", "nodes", "-o", "wide"},
				{"get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name}{": "}{.status.conditions[?(@.type=="Ready")].message}{"\n"}{end}`},
				{"get", "pods", "-A", "-o", "wide"},
			} {
				out, _ := k(args...)
				fmt.Fprintf(os.Stderr, "$ kubectl %s\n%s\n", strings.Join(args, " "), out)
			}
			return r, fmt.Errorf("floor: %d of %d nodes Ready after %s (%v)", n, len(nodes), b.o.readyWait, err)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return r, err
		}
	}
	r.total = time.Since(start)
	r.ready = r.total - r.init - r.joins
	say("floor: every node Ready %.1fs after kubeadm init started", r.total.Seconds())
	return r, nil
}

func printKube(r kubeResult) {
	fmt.Println("\n== results (figures, not assertions; targets from issue 11)")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "measure\ttime\ttarget\t")
	fmt.Fprintf(tw, "Plinth: apply -> every node Ready\t%.1fs\t<= 60s\t\n", r.nodesReady.Seconds())
	fmt.Fprintf(tw, "Plinth: apply -> Site Ready (labels, health checked)\t%.1fs\t\t\n", r.siteReady.Seconds())
	fmt.Fprintf(tw, "Plinth: kube.init start -> every node Ready\t%.1fs\t\t\n", r.fromInit.Seconds())
	fmt.Fprintf(tw, "floor: kubeadm init, API through the endpoint\t%.1fs\t\t\n", r.floor.init.Seconds())
	fmt.Fprintf(tw, "floor: joins (parallel) + flannel apply\t%.1fs\t\t\n", r.floor.joins.Seconds())
	fmt.Fprintf(tw, "floor: then every node Ready\t%.1fs\t\t\n", r.floor.ready.Seconds())
	fmt.Fprintf(tw, "floor: kubeadm init -> every node Ready\t%.1fs\t\t\n", r.floor.total.Seconds())
	tw.Flush()
	if r.floor.total > 0 {
		fmt.Printf("ratio Plinth (kube.init start -> nodes Ready) / floor: %.2f× (target <= 1.5×)\n", r.fromInit.Seconds()/r.floor.total.Seconds())
		fmt.Printf("ratio Plinth (apply -> nodes Ready, with containerd, images, binaries, etcd, VIP) / floor: %.2f×\n", r.nodesReady.Seconds()/r.floor.total.Seconds())
	}
	fmt.Println("Node Ready times come from the nodes' Ready conditions (whole seconds).")
}

// kubeLab is the lab of the -kube run: the demo's addresses, which the lab manifest
// names (only one such lab runs at a time: not beside make demo or test/e2e's
// TestLabKubernetes).
func kubeLab(ctx context.Context, o options, dir string) (*bench, error) {
	prefix, err := pickPrefix(ctx)
	if err != nil {
		return nil, err
	}
	spec := lab.DefaultSpec("")
	l := lab.New(filepath.Join(dir, "lab"), o.bin, prefix)
	l.RuncWrapper = o.runcWrapper
	return &bench{o: o, dir: dir, l: l, spec: spec, n: 211, prefix: prefix}, nil
}
