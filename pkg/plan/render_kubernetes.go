package plan

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/containerd/containerdspec"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
	"github.com/plinth-dev/plinth/pkg/secretref"
)

// renderKubernetes renders the Kubernetes bootstrap when the site declares it:
//
//	<host>/kube.binaries (with a site bundle) → <controller>/kube.vip,
//	<controller>/kube.etcd, <witness>/kube.etcd
//	→ <controller-0>/kube.init → <controller-1>/kube.join-control-plane, <worker>/kube.join
//	→ <controller-0>/kube.cni, <controller-0>/kube.labels/<node>
//	→ <controller-0>/kube.health
//
// Nothing renders until the first controller is declared: no other step can run
// without it. docs/kubernetes.md describes each step.
func renderKubernetes(in renderInput) ([]Step, error) {
	if in.site == nil || in.site.Spec.Kubernetes == nil {
		return nil, nil
	}
	t := newKubeTopology(in)
	if t.first == nil {
		return nil, nil
	}
	r := kubeRenderer{in: in, t: t, k: in.site.Spec.Kubernetes.Effective()}
	return r.render()
}

// kubeTopology is who does what: control planes, the witness's etcd, workers.
type kubeTopology struct {
	first    *api.Host  // runs kubeadm init
	second   *api.Host  // joins as a control plane
	witness  *api.Host  // third etcd member only
	workers  []api.Host // kubeadm join
	etcd     []api.Host // etcd members
	withCtrd map[string]bool
}

func newKubeTopology(in renderInput) kubeTopology {
	byName := map[string]*api.Host{}
	for i := range in.hosts {
		byName[in.hosts[i].Metadata.Name] = &in.hosts[i]
	}
	spec := in.site.Spec
	var t kubeTopology
	if len(spec.Controllers) > 0 {
		t.first = byName[spec.Controllers[0]]
	}
	if len(spec.Controllers) > 1 {
		t.second = byName[spec.Controllers[1]]
	}
	if t.first != nil {
		t.etcd = append(t.etcd, *t.first)
	}
	if t.second != nil {
		t.etcd = append(t.etcd, *t.second)
		// A witness only helps a pair: with one controller it would make two members,
		// which tolerate no more failures than one.
		if w := byName[spec.Witness]; w != nil {
			t.witness = w
			t.etcd = append(t.etcd, *w)
		}
	}
	for _, h := range in.hosts {
		n := h.Metadata.Name
		if slices.Contains(h.Spec.Roles, api.RoleWorker) && !slices.Contains(spec.Controllers, n) && n != spec.Witness {
			t.workers = append(t.workers, h)
		}
	}
	// Depend on the container runtime steps only where that area renders them.
	t.withCtrd = map[string]bool{}
	if cs, err := renderContainerd(in); err == nil {
		for _, s := range cs {
			t.withCtrd[s.ID] = true
		}
	}
	return t
}

type kubeRenderer struct {
	in    renderInput
	t     kubeTopology
	k     api.KubernetesSpec
	steps []Step
	err   error
	// binaries holds each host's kube.binaries step, when the site names a bundle.
	binaries map[string]string
}

func (r *kubeRenderer) add(h, kind, name string, inputs any, deps ...string) string {
	if r.err != nil {
		return ""
	}
	s, err := NewStep(h, kind, name, inputs, deps...)
	if err != nil {
		r.err = fmt.Errorf("plan: host %s: render %s: %w", h, kind, err)
		return ""
	}
	r.steps = append(r.steps, s)
	return s.ID
}

func (r *kubeRenderer) render() ([]Step, error) {
	t, k, site := r.t, r.k, r.in.site
	first := t.first.Metadata.Name
	cluster := r.cluster()
	note := r.etcdNote()
	gen := strconv.Itoa(k.CredentialsGeneration)
	token := secretref.GeneratedRef(secretref.GenBootstrapToken, site.Metadata.Name+"-kube-"+gen)
	certKey := secretref.GeneratedRef(secretref.GenHex32, site.Metadata.Name+"-kube-certificate-key-"+gen)
	initID := StepID(first, kubespec.KindInit, "")

	r.renderBinaries()
	// Control-plane prerequisites: the VIP's static pod and the etcd members.
	prereq := map[string][]string{}
	for _, h := range []*api.Host{t.first, t.second} {
		if h == nil || k.ControlPlaneVIP == "" {
			continue
		}
		n := h.Metadata.Name
		prereq[n] = append(prereq[n], r.add(n, kubespec.KindVIP, "", r.vip(h, h == t.first), r.network(n)))
	}
	var etcdIDs []string
	for _, h := range t.etcd {
		n := h.Metadata.Name
		id := r.add(n, kubespec.KindEtcd, "", r.etcdInputs(h, note), kubeDedup([]string{r.network(n), r.binaries[n]})...)
		etcdIDs = append(etcdIDs, id)
		prereq[n] = append(prereq[n], id)
	}

	var cps, workers []string
	if t.second != nil {
		cps = append(cps, t.second.Metadata.Name)
	}
	for _, w := range t.workers {
		workers = append(workers, w.Metadata.Name)
	}
	initIn := kubespec.InitInputs{
		Cluster: cluster, Node: r.node(*t.first, true), Token: token,
		TokenTTL:       (time.Duration(k.BootstrapTokenTTLHours) * time.Hour).String(),
		CertificateKey: certKey, ControlPlanes: cps, Workers: workers, Note: note,
	}
	deps := append(append(r.runtime(first), prereq[first]...), etcdIDs...)
	r.add(first, kubespec.KindInit, "", initIn, kubeDedup(deps)...)
	joinIDs := map[string]string{first: initID}

	caHash := secretref.OutputRef(initID, kubespec.OutputCACertHash)
	if h := t.second; h != nil {
		n := h.Metadata.Name
		in := kubespec.JoinInputs{Cluster: cluster, Node: r.node(*h, true), Token: token, CACertHash: caHash,
			ControlPlane: true, CertificateKey: certKey}
		joinIDs[n] = r.add(n, kubespec.KindJoinControlPlane, "", in, append(append(r.runtime(n), prereq[n]...), initID)...)
	}
	for _, h := range t.workers {
		n := h.Metadata.Name
		in := kubespec.JoinInputs{Cluster: cluster, Node: r.node(h, false), Token: token, CACertHash: caHash}
		joinIDs[n] = r.add(n, kubespec.KindJoin, "", in, append(r.runtime(n), initID)...)
	}

	admin := secretref.OutputRef(initID, kubespec.OutputAdminConf)
	// kube.health waits for everything that makes the cluster: init, the joins, the
	// pod network (no node is Ready without it) and the labels.
	var healthDeps, names []string
	if k.CNI.Plugin != api.CNINone {
		healthDeps = append(healthDeps, r.add(first, kubespec.KindCNI, "", cniInputs(k, admin), initID))
	}
	for _, h := range r.nodes() {
		n := h.Metadata.Name
		ctl := h.Metadata.Name == first || (t.second != nil && n == t.second.Metadata.Name)
		in := kubespec.LabelsInputs{Node: n, Labels: r.labels(h, ctl), Taints: r.node(h, ctl).Taints, Kubeconfig: admin}
		healthDeps = append(healthDeps, joinIDs[n], r.add(first, kubespec.KindLabels, n, in, joinIDs[n]))
		names = append(names, n)
	}
	health := kubespec.HealthInputs{Endpoint: "https://" + cluster.Endpoint, VIP: cluster.VIP, Nodes: names, Kubeconfig: admin}
	r.add(first, kubespec.KindHealth, "", health, kubeDedup(healthDeps)...)
	return r.steps, r.err
}

// nodes are the Kubernetes nodes: the controllers and the workers.
func (r *kubeRenderer) nodes() []api.Host {
	out := []api.Host{*r.t.first}
	if r.t.second != nil {
		out = append(out, *r.t.second)
	}
	return append(out, r.t.workers...)
}

func (r *kubeRenderer) network(h string) string { return StepID(h, hostspec.KindNetwork, "") }

// renderBinaries plans <host>/kube.binaries on every node and etcd member when the
// site names a bundle: what each host installs follows from what it runs.
func (r *kubeRenderer) renderBinaries() {
	b := r.k.Bundle
	if b == nil {
		return
	}
	r.binaries = map[string]string{}
	need := map[string]*kubespec.BinariesInputs{}
	var order []string
	get := func(h string) *kubespec.BinariesInputs {
		if need[h] == nil {
			need[h] = &kubespec.BinariesInputs{Bundle: b.Version, SHA256: b.SHA256}
			order = append(order, h)
		}
		return need[h]
	}
	for _, h := range r.nodes() {
		in := get(h.Metadata.Name)
		in.Binaries = append(in.Binaries, "kubeadm", "kubectl", "kubelet")
		in.CNIPlugins, in.Kubelet = true, true
	}
	for _, h := range r.t.etcd {
		in := get(h.Metadata.Name)
		in.Binaries = append(in.Binaries, "etcd", "etcdctl")
	}
	for _, h := range order {
		in := need[h]
		slices.Sort(in.Binaries)
		r.binaries[h] = r.add(h, kubespec.KindBinaries, "", *in, r.network(h))
	}
}

// runtime is the host's network step and, where rendered, its containerd and
// kube.binaries steps.
func (r *kubeRenderer) runtime(h string) []string {
	deps := []string{r.network(h)}
	if id := r.binaries[h]; id != "" {
		deps = append(deps, id)
	}
	for _, kind := range []string{containerdspec.KindConfig, containerdspec.KindImport} {
		if id := StepID(h, kind, ""); r.t.withCtrd[id] {
			deps = append(deps, id)
		}
	}
	return deps
}

func (r *kubeRenderer) cluster() kubespec.Cluster {
	k := r.k
	endpointIP := r.nodeIP(*r.t.first)
	if k.ControlPlaneVIP != "" {
		endpointIP = k.ControlPlaneVIP
	}
	sans := []string{}
	if k.ControlPlaneVIP != "" {
		sans = append(sans, k.ControlPlaneVIP)
	}
	for _, h := range []*api.Host{r.t.first, r.t.second} {
		if h != nil {
			sans = append(sans, h.Metadata.Name, r.nodeIP(*h))
		}
	}
	var eps []string
	for _, h := range r.t.etcd {
		eps = append(eps, "https://"+kubeHostPort(r.nodeIP(h), k.Etcd.ClientPort))
	}
	return kubespec.Cluster{
		Name: r.in.site.Metadata.Name, Version: k.Version, Endpoint: kubeHostPort(endpointIP, k.APIServerPort),
		PodSubnet: k.PodSubnet, ServiceSubnet: k.ServiceSubnet, DNSDomain: k.DNSDomain,
		ImageRepository: k.ImageRepository, CertSANs: kubeDedup(append(sans, k.CertSANs...)),
		CgroupDriver: k.EffectiveContainerd().CgroupDriver, CRISocket: k.CRISocket, ProxyMode: k.ProxyMode,
		EtcdEndpoints: eps, VIP: k.ControlPlaneVIP != "",
	}
}

// node is one node's registration: address, taints, reserved CPUs.
func (r *kubeRenderer) node(h api.Host, controlPlane bool) kubespec.Node {
	n := kubespec.Node{Name: h.Metadata.Name, IP: r.nodeIP(h), Taints: []kubespec.Taint{}}
	if controlPlane && !r.k.SchedulableControllers {
		n.Taints = append(n.Taints, kubespec.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: "NoSchedule"})
	}
	settings := r.k.Node(h.Metadata.Name)
	for _, s := range settings.Taints {
		if t, err := api.ParseTaint(s); err == nil {
			n.Taints = append(n.Taints, kubespec.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
	}
	n.ReservedCPUs = settings.ReservedCPUs
	if n.ReservedCPUs == "" && r.dpdk(h) {
		n.ReservedCPUs = r.k.DPDKReservedCPUs
	}
	return n
}

// dpdk reports whether the host runs the OVS-DPDK datapath (the vswitch rule).
func (r *kubeRenderer) dpdk(h api.Host) bool {
	_, d := vswitch(r.in.site, h, r.in.nets)
	return d.Enabled
}

// labels are the OpenStack-Helm node labels from roles and the manifest; a host's own
// labels win.
func (r *kubeRenderer) labels(h api.Host, controlPlane bool) map[string]string {
	l := map[string]string{}
	if controlPlane {
		l[kubespec.LabelControlPlane] = kubespec.LabelEnabled
	}
	if slices.Contains(h.Spec.Roles, api.RoleWorker) {
		l[kubespec.LabelCompute] = kubespec.LabelEnabled
	}
	if runs, _ := vswitch(r.in.site, h, r.in.nets); runs {
		l[kubespec.LabelOpenvswitch] = kubespec.LabelEnabled
	}
	if r.k.Node(h.Metadata.Name).SRIOV {
		l[kubespec.LabelSRIOV] = kubespec.LabelEnabled
	}
	for k, v := range h.Spec.Labels {
		l[k] = v
	}
	return l
}

func (r *kubeRenderer) etcdInputs(h api.Host, note string) kubespec.EtcdInputs {
	var members []kubespec.EtcdMember
	var self kubespec.EtcdMember
	for _, m := range r.t.etcd {
		em := kubespec.EtcdMember{Name: m.Metadata.Name, IP: r.nodeIP(m),
			ClientPort: r.k.Etcd.ClientPort, PeerPort: r.k.Etcd.PeerPort}
		members = append(members, em)
		if em.Name == h.Metadata.Name {
			self = em
		}
	}
	isWitness := r.t.witness != nil && h.Metadata.Name == r.t.witness.Metadata.Name
	return kubespec.EtcdInputs{
		Member: self, Members: members, ClusterToken: r.in.site.Metadata.Name + "-etcd",
		CA: secretref.GeneratedRef(secretref.GenEtcdCA, r.in.site.Metadata.Name), DataDir: r.k.Etcd.DataDir,
		Binary: r.k.Etcd.Binary, APIServerClient: !isWitness, Note: note,
	}
}

// etcdNote says what the etcd topology survives; the operator sees it in the plan.
func (r *kubeRenderer) etcdNote() string {
	names := make([]string, len(r.t.etcd))
	for i, h := range r.t.etcd {
		names[i] = h.Metadata.Name
	}
	switch len(names) {
	case 3:
		return fmt.Sprintf("etcd has 3 members (%s %s %s): the control plane survives the loss of any one", names[0], names[1], names[2])
	case 2:
		return fmt.Sprintf("control plane NOT fault tolerant: etcd has 2 members (%s, %s) and no witness, so losing either controller stops the Kubernetes API; declare spec.witness for a third member (docs/kubernetes.md)", names[0], names[1])
	}
	return "control plane NOT fault tolerant: a single controller runs the only etcd member"
}

// nodeIP is the host's address on a cluster-host network, else on a mgmt network
// (static, or allocated from the network's pool), else its management address.
func (r *kubeRenderer) nodeIP(h api.Host) string {
	for _, role := range []string{api.NetworkClusterHost, api.NetworkMgmt} {
		for _, n := range r.in.site.Spec.Networks {
			if n.Role != role {
				continue
			}
			if ip, _ := kubeAddressIn(h, n.CIDR); ip != "" {
				return ip
			}
			if ip := r.in.allocs[[2]string{n.Name, h.Metadata.Name}]; ip != "" {
				return ip
			}
		}
	}
	return h.Spec.ManagementAddress
}

// kubeVIPInterface is the host interface with an address in, or carrying, the VIP's
// network; kube-vip finds one at run time when the manifest does not say.
func kubeVIPInterface(h api.Host, vip string, nets []api.Network) string {
	a, err := netip.ParseAddr(vip)
	if err != nil {
		return ""
	}
	for _, n := range nets {
		p, err := netip.ParsePrefix(n.CIDR)
		if err != nil || !p.Contains(a) {
			continue
		}
		if _, ifc := kubeAddressIn(h, n.CIDR); ifc != "" {
			return ifc
		}
		for _, ifc := range h.Spec.Interfaces {
			if slices.Contains(ifc.Networks, n.Name) {
				return ifc.Name
			}
		}
	}
	return ""
}

// kubeAddressIn returns the host's first address inside cidr and its interface.
func kubeAddressIn(h api.Host, cidr string) (ip, ifc string) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", ""
	}
	for _, in := range h.Spec.Interfaces {
		for _, a := range in.Addresses {
			if ap, err := netip.ParsePrefix(a); err == nil && p.Contains(ap.Addr()) {
				return ap.Addr().String(), in.Name
			}
		}
	}
	if a, err := netip.ParseAddr(h.Spec.ManagementAddress); err == nil && p.Contains(a) {
		return a.String(), ""
	}
	return "", ""
}

func kubeHostPort(ip string, port int) string {
	if a, err := netip.ParseAddr(ip); err == nil && a.Is6() {
		return "[" + ip + "]:" + strconv.Itoa(port)
	}
	return ip + ":" + strconv.Itoa(port)
}

func kubeDedup(s []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, v := range s {
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
