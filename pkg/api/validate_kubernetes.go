package api

import (
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/plinth-dev/plinth/pkg/bundle"
)

// minKubeMinor is the oldest Kubernetes minor Plinth can bootstrap: kubeadm's v1beta4
// configuration, which Plinth writes, appeared in v1.31.
const minKubeMinor = 31

func (v *validator) kubernetes(k *KubernetesSpec, nets []Network, prefixes []netip.Prefix) {
	const kp = "site.spec.kubernetes"
	if k.Version != "" {
		if m := versionRE.FindStringSubmatch(k.Version); m == nil {
			v.add(kp+".version", "%q is not a valid version; use the form v1.37.2", clip(k.Version))
		} else if major, minor := m[1], atoi(m[2]); major != "1" || minor < minKubeMinor {
			v.add(kp+".version", "%s is not supported: Plinth writes kubeadm v1beta4 configuration, which needs v1.%d or newer", k.Version, minKubeMinor)
		}
	}
	// Check the effective subnets: an unset one still claims its default range, and a
	// clash with a site network is just as fatal then.
	subnet := func(field, s, def string) netip.Prefix {
		note := ""
		if s == "" {
			s, note = def, " (the default; set "+field+" to a free range)"
		}
		pfx, ok := v.cidr(kp+"."+field, s)
		if !ok {
			return netip.Prefix{}
		}
		for i, q := range prefixes {
			if q.IsValid() && q.Overlaps(pfx) {
				v.add(kp+"."+field, "%s overlaps network %q (%s)%s", pfx, nets[i].Name, q, note)
			}
		}
		return pfx
	}
	pod := subnet("podSubnet", k.PodSubnet, DefaultPodSubnet)
	svc := subnet("serviceSubnet", k.ServiceSubnet, DefaultServiceSubnet)
	if pod.IsValid() && svc.IsValid() && pod.Overlaps(svc) {
		v.add(kp+".serviceSubnet", "%s overlaps podSubnet (%s)", svc, pod)
	}
	v.kubeSettings(kp, k)
	v.etcd(kp+".etcd", &k.Etcd, orDefault(k.APIServerPort, DefaultAPIServerPort))
	v.cni(kp+".cni", &k.CNI)
	v.kubeNodes(kp+".nodes", k.Nodes)
	v.containerd(k.Containerd)
	if k.Bundle != nil {
		v.bundle(kp+".bundle", k.Bundle)
	}
	if k.ControlPlaneVIP != "" {
		v.vip(kp+".controlPlaneVIP", k.ControlPlaneVIP, nets, prefixes)
	}
}

// vip checks that the control-plane VIP lies in a network the controllers share.
func (v *validator) vip(p, s string, nets []Network, prefixes []netip.Prefix) {
	vip, ok := v.ip(p, s)
	if !ok {
		return
	}
	var candidates []string
	for i, n := range nets {
		if n.Role != NetworkMgmt && n.Role != NetworkClusterHost {
			continue
		}
		if prefixes[i].Contains(vip) {
			if vip == prefixes[i].Addr() {
				v.add(p, "%s is the network address of %q (%s); pick a free host address", vip, n.Name, prefixes[i])
			}
			return
		}
		candidates = append(candidates, fmt.Sprintf("%s %s", n.Name, n.CIDR))
	}
	if len(candidates) == 0 {
		v.add(p, "%s must be inside a mgmt or cluster-host network, and the site declares none", vip)
		return
	}
	v.add(p, "%s is not inside any mgmt or cluster-host network (%s)", vip, strings.Join(candidates, ", "))
}

// vipTaken refuses a VIP that the coordinators could hand to a host (inside an
// address pool) or that a host already holds (its management or a static address):
// two holders of one address break both.
func (v *validator) vipTaken(p, s string, nets []Network, hosts []Host) {
	vip, err := netip.ParseAddr(s)
	if err != nil {
		return // reported by vip
	}
	for _, n := range nets {
		if n.Pool == nil {
			continue
		}
		start, e1 := netip.ParseAddr(n.Pool.Start)
		end, e2 := netip.ParseAddr(n.Pool.End)
		if e1 == nil && e2 == nil && start.Compare(vip) <= 0 && vip.Compare(end) <= 0 {
			v.add(p, "%s is inside the address pool of network %q (%s-%s), so a host could be given it; pick an address outside the pool", vip, n.Name, start, end)
		}
	}
	for _, h := range hosts {
		hp := index("hosts", h.Metadata.Name) + ".spec"
		where := ""
		if a, err := netip.ParseAddr(h.Spec.ManagementAddress); err == nil && a == vip {
			where = hp + ".managementAddress"
		}
		for i, ifc := range h.Spec.Interfaces {
			for j, a := range ifc.Addresses {
				if pfx, err := netip.ParsePrefix(a); err == nil && pfx.Addr() == vip && where == "" {
					where = fmt.Sprintf("%s.interfaces[%s].addresses[%d]", hp, key(ifc.Name, i), j)
				}
			}
		}
		if where != "" {
			v.add(p, "%s is host %s's address (%s); the VIP must be an address no host has", vip, h.Metadata.Name, where)
		}
	}
}

func (v *validator) bundle(p string, b *BundleRef) {
	switch {
	case b.Version == "":
		v.add(p+".version", "is required: the version of the site bundle the install script unpacked (see its manifest.json)")
	default:
		if err := bundle.CheckVersion(b.Version); err != nil {
			v.add(p+".version", "%s", clip(err.Error()))
		}
	}
	if b.SHA256 != "" && !sha256HexRE.MatchString(b.SHA256) {
		v.add(p+".sha256", "%q is not a SHA-256 digest: want 64 lowercase hex digits (plinth-bundle show prints it)", clip(b.SHA256))
	}
}

var sha256HexRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// kubeSettings checks the scalar settings that have a fixed set of valid values.
func (v *validator) kubeSettings(p string, k *KubernetesSpec) {
	v.port(p+".apiServerPort", k.APIServerPort)
	if k.DNSDomain != "" && !isDNSName(k.DNSDomain) {
		v.add(p+".dnsDomain", "%q is not a valid DNS domain (want e.g. cluster.local)", clip(k.DNSDomain))
	}
	if k.ImageRepository != "" && !validImageRef(k.ImageRepository) {
		v.add(p+".imageRepository", "%q is not a valid image repository (want e.g. registry.local:5000/k8s, without a scheme)", clip(k.ImageRepository))
	}
	v.oneOf(p+".vipProvider", k.VIPProvider, true, VIPProviders...)
	switch {
	case k.KubeVIPImage == "":
	case k.VIPProvider == VIPKeepalived:
		v.add(p+".kubeVIPImage", "set, but vipProvider is keepalived, which runs no image; remove it or set vipProvider: kube-vip")
	case !validImageRef(k.KubeVIPImage):
		v.add(p+".kubeVIPImage", "%q is not a valid image reference (want e.g. registry.local:5000/kube-vip:v0.9.2)", clip(k.KubeVIPImage))
	}
	for i, san := range k.CertSANs {
		if _, err := netip.ParseAddr(san); err != nil && !isDNSName(strings.TrimPrefix(san, "*.")) {
			v.add(index(p+".certSANs", strconv.Itoa(i)), "%q is neither an IP address nor a DNS name", clip(san))
		}
	}
	v.oneOf(p+".proxyMode", k.ProxyMode, true, ProxyModes...)
	if k.CRISocket != "" && (!strings.HasPrefix(k.CRISocket, "unix:///") || len(k.CRISocket) == len("unix:///")) {
		v.add(p+".criSocket", "%q is not valid; want a unix socket URL such as %s", clip(k.CRISocket), DefaultCRISocket)
	}
	if k.DPDKReservedCPUs != "" && !validCPUSet(k.DPDKReservedCPUs) {
		v.add(p+".dpdkReservedCPUs", "%q is not a valid cpuset (want e.g. 0-3 or 0,1,8-9)", clip(k.DPDKReservedCPUs))
	}
	if h := k.BootstrapTokenTTLHours; h < 0 || h > 24*365 {
		v.add(p+".bootstrapTokenTTLHours", "%d is out of range; valid values are 1..8760 (0 for the default, %d)", h, DefaultBootstrapTokenTTLH)
	}
	if k.CredentialsGeneration < 0 {
		v.add(p+".credentialsGeneration", "%d must not be negative", k.CredentialsGeneration)
	}
}

func (v *validator) etcd(p string, e *EtcdSpec, apiPort int) {
	for _, f := range []struct{ field, val string }{{"binary", e.Binary}, {"dataDir", e.DataDir}} {
		if f.val != "" && (!path.IsAbs(f.val) || path.Clean(f.val) != f.val) {
			v.add(p+"."+f.field, "%q must be a clean absolute path", clip(f.val))
		}
	}
	v.port(p+".clientPort", e.ClientPort)
	v.port(p+".peerPort", e.PeerPort)
	client, peer := orDefault(e.ClientPort, DefaultEtcdClientPort), orDefault(e.PeerPort, DefaultEtcdPeerPort)
	switch {
	case client == peer:
		v.add(p+".peerPort", "%d is also the clientPort; etcd needs two ports", peer)
	case client == apiPort || peer == apiPort:
		v.add(p, "ports %d/%d clash with the API server's port %d", client, peer, apiPort)
	}
}

func (v *validator) cni(p string, c *CNISpec) {
	v.oneOf(p+".plugin", c.Plugin, true, CNIPlugins...)
	switch {
	case c.Manifest == "":
	case c.Plugin == CNINone:
		v.add(p+".manifest", "set, but plugin is none; remove it or set plugin: calico")
	case c.Plugin == CNIFlannel:
		v.add(p+".manifest", "set, but plugin is flannel, whose manifest Plinth renders; remove it")
	case !path.IsAbs(c.Manifest) || path.Clean(c.Manifest) != c.Manifest:
		v.add(p+".manifest", "%q must be a clean absolute path on the first controller", clip(c.Manifest))
	}
}

func (v *validator) kubeNodes(p string, nodes []KubernetesNode) {
	seen := map[string]bool{}
	for i, n := range nodes {
		np := index(p, key(n.Host, i))
		switch {
		case n.Host == "" || !isDNSLabel(n.Host):
			v.name(np+".host", n.Host, "host")
		case seen[n.Host]:
			v.add(np+".host", "%q is listed twice", n.Host)
		}
		seen[n.Host] = true
		if n.ReservedCPUs != "" && !validCPUSet(n.ReservedCPUs) {
			v.add(np+".reservedCPUs", "%q is not a valid cpuset (want e.g. 0-3 or 0,1,8-9)", clip(n.ReservedCPUs))
		}
		for j, t := range n.Taints {
			if _, err := ParseTaint(t); err != nil {
				v.add(index(np+".taints", strconv.Itoa(j)), "%v", err)
			}
		}
	}
}

func (v *validator) port(p string, n int) {
	if n < 0 || n > 65535 {
		v.add(p, "%d is out of range; valid ports are 1..65535 (0 for the default)", n)
	}
}

// Taint is a parsed node taint.
type Taint struct {
	Key, Value, Effect string
}

var taintEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

// ParseTaint parses "key=value:Effect" or "key:Effect".
func ParseTaint(s string) (Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return Taint{}, fmt.Errorf("%q is not a taint; want key=value:Effect or key:Effect", clip(s))
	}
	k, val, _ := strings.Cut(kv, "=")
	switch {
	case !validLabelKey(k):
		return Taint{}, fmt.Errorf("%q: key %q is not a valid label key", clip(s), clip(k))
	case val != "" && !validLabelValue(val):
		return Taint{}, fmt.Errorf("%q: value %q is not a valid label value", clip(s), clip(val))
	case effect != "NoSchedule" && effect != "PreferNoSchedule" && effect != "NoExecute":
		return Taint{}, fmt.Errorf("%q: effect %q is not valid; valid effects are %s", clip(s), clip(effect), strings.Join(taintEffects, ", "))
	}
	return Taint{Key: k, Value: val, Effect: effect}, nil
}

// validLabelKey accepts Kubernetes label keys: [prefix/]name.
func validLabelKey(k string) bool {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	if hasPrefix && (!isDNSName(prefix) || len(prefix) > 253) {
		return false
	}
	return name != "" && validLabelValue(name)
}

// validLabelValue accepts up to 63 of [A-Za-z0-9_.-], starting and ending alphanumeric.
func validLabelValue(s string) bool {
	if len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && ((c != '-' && c != '_' && c != '.') || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}

// isDNSName reports whether s is a dotted sequence of DNS labels.
func isDNSName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for l := range strings.SplitSeq(s, ".") {
		if !isDNSLabel(l) {
			return false
		}
	}
	return true
}

// validImageRef is a loose check for "host[:port]/path[:tag]" without a scheme or spaces.
func validImageRef(s string) bool {
	return !strings.Contains(s, "://") && !strings.ContainsAny(s, " \t\n") &&
		!strings.HasPrefix(s, "/") && !strings.HasSuffix(s, "/") && !strings.Contains(s, "//")
}

// validCPUSet accepts Linux cpuset lists: "0-3", "0,2,8-11".
func validCPUSet(s string) bool {
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		if err1 != nil || a < 0 || !allDigits(lo) {
			return false
		}
		if isRange {
			b, err2 := strconv.Atoi(hi)
			if err2 != nil || !allDigits(hi) || b < a {
				return false
			}
		}
	}
	return true
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
