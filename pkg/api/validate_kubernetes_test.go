package api

import (
	"strings"
	"testing"
)

func TestValidateKubernetes(t *testing.T) {
	const kube = "site.spec.kubernetes"
	tests := []struct {
		name   string
		mutate func(k *KubernetesSpec)
		path   string
		msg    string
	}{
		{"version too old", func(k *KubernetesSpec) { k.Version = "v1.30.4" }, kube + ".version", "v1.30.4 is not supported: Plinth writes kubeadm v1beta4 configuration, which needs v1.31 or newer"},
		{"version 2.x", func(k *KubernetesSpec) { k.Version = "v2.0.0" }, kube + ".version", "not supported"},
		{"vip network address", func(k *KubernetesSpec) { k.ControlPlaneVIP = "10.0.1.0" }, kube + ".controlPlaneVIP", `is the network address of "cluster"`},
		{"api port", func(k *KubernetesSpec) { k.APIServerPort = 70000 }, kube + ".apiServerPort", "70000 is out of range"},
		{"dns domain", func(k *KubernetesSpec) { k.DNSDomain = "Cluster_Local" }, kube + ".dnsDomain", "not a valid DNS domain"},
		{"image repository scheme", func(k *KubernetesSpec) { k.ImageRepository = "https://registry.local" }, kube + ".imageRepository", "without a scheme"},
		{"cert SAN", func(k *KubernetesSpec) { k.CertSANs = []string{"api.example.com", "not a name"} }, kube + ".certSANs[1]", "neither an IP address nor a DNS name"},
		{"proxy mode", func(k *KubernetesSpec) { k.ProxyMode = "userspace" }, kube + ".proxyMode", "valid values are nftables, iptables, ipvs"},
		{"cri socket", func(k *KubernetesSpec) { k.CRISocket = "/run/containerd.sock" }, kube + ".criSocket", "want a unix socket URL"},
		{"reserved cpus", func(k *KubernetesSpec) { k.DPDKReservedCPUs = "3-1" }, kube + ".dpdkReservedCPUs", "not a valid cpuset"},
		{"token ttl", func(k *KubernetesSpec) { k.BootstrapTokenTTLHours = -1 }, kube + ".bootstrapTokenTTLHours", "out of range"},
		{"credentials generation", func(k *KubernetesSpec) { k.CredentialsGeneration = -2 }, kube + ".credentialsGeneration", "must not be negative"},
		{"etcd relative data dir", func(k *KubernetesSpec) { k.Etcd.DataDir = "var/lib/etcd" }, kube + ".etcd.dataDir", "clean absolute path"},
		{"etcd ports equal", func(k *KubernetesSpec) { k.Etcd.PeerPort = 2379 }, kube + ".etcd.peerPort", "also the clientPort"},
		{"etcd port is the API's", func(k *KubernetesSpec) { k.APIServerPort = 2379 }, kube + ".etcd", "clash with the API server's port 2379"},
		{"vip provider", func(k *KubernetesSpec) { k.VIPProvider = "ucarp" }, kube + ".vipProvider", `"ucarp" is not valid; valid values are keepalived, kube-vip`},
		{"kube-vip image with keepalived", func(k *KubernetesSpec) { k.VIPProvider, k.KubeVIPImage = VIPKeepalived, "r/kube-vip:v1" }, kube + ".kubeVIPImage", "vipProvider is keepalived"},
		{"kube-vip image", func(k *KubernetesSpec) { k.VIPProvider, k.KubeVIPImage = VIPKubeVIP, "https://r/kube-vip" }, kube + ".kubeVIPImage", "not a valid image reference"},
		{"cni plugin", func(k *KubernetesSpec) { k.CNI.Plugin = "cilium" }, kube + ".cni.plugin", "valid values are calico, flannel, none"},
		{"cni manifest with flannel", func(k *KubernetesSpec) { k.CNI = CNISpec{Plugin: CNIFlannel, Manifest: "/x.yaml"} }, kube + ".cni.manifest", "plugin is flannel"},
		{"cni manifest without plugin", func(k *KubernetesSpec) { k.CNI = CNISpec{Plugin: CNINone, Manifest: "/x.yaml"} }, kube + ".cni.manifest", "plugin is none"},
		{"cni manifest relative", func(k *KubernetesSpec) { k.CNI.Manifest = "calico.yaml" }, kube + ".cni.manifest", "clean absolute path"},
		{"node twice", func(k *KubernetesSpec) { k.Nodes = []KubernetesNode{{Host: "compute-0"}, {Host: "compute-0"}} }, kube + ".nodes[compute-0].host", "listed twice"},
		{"node taint", func(k *KubernetesSpec) {
			k.Nodes = []KubernetesNode{{Host: "compute-0", Taints: []string{"nfv:Sometimes"}}}
		},
			kube + ".nodes[compute-0].taints[0]", `effect "Sometimes" is not valid; valid effects are NoSchedule, PreferNoSchedule, NoExecute`},
		{"bundle without version", func(k *KubernetesSpec) { k.Bundle = &BundleRef{} }, kube + ".bundle.version", "is required"},
		{"bundle version escapes", func(k *KubernetesSpec) { k.Bundle = &BundleRef{Version: "../../etc"} }, kube + ".bundle.version", "is not valid: use at most 128 letters"},
		{"bundle version with a slash", func(k *KubernetesSpec) { k.Bundle = &BundleRef{Version: "1.0/x"} }, kube + ".bundle.version", "is not valid: use at most 128 letters"},
		{"bundle pin not hex", func(k *KubernetesSpec) { k.Bundle = &BundleRef{Version: "1.0", SHA256: "ABC"} }, kube + ".bundle.sha256", "64 lowercase hex digits"},
		{"node cpus", func(k *KubernetesSpec) { k.Nodes = []KubernetesNode{{Host: "compute-0", ReservedCPUs: "a-b"}} }, kube + ".nodes[compute-0].reservedCPUs", "not a valid cpuset"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := example(t)
			tc.mutate(m.Site.Spec.Kubernetes)
			errs := m.Validate("site.yaml")
			if !findError(errs, tc.path, tc.msg) || len(errs) != 1 {
				t.Fatalf("want one error at %s containing %q, got:\n%v", tc.path, tc.msg, errs)
			}
		})
	}
}

func TestValidateKubernetesAcceptsAFullSpec(t *testing.T) {
	m := example(t)
	k := m.Site.Spec.Kubernetes
	*k = KubernetesSpec{Version: "v1.37.2", ControlPlaneVIP: "10.0.1.10", APIServerPort: 16443, DNSDomain: "cluster.local",
		ImageRepository: "registry.local:5000/k8s", CertSANs: []string{"api.example.com", "10.0.1.10", "*.apps.example.com"},
		ProxyMode: "ipvs", CRISocket: DefaultCRISocket, SchedulableControllers: true, DPDKReservedCPUs: "0-1,8-9",
		BootstrapTokenTTLHours: 2, CredentialsGeneration: 3, VIPProvider: VIPKeepalived, Etcd: EtcdSpec{Binary: "/usr/bin/etcd", DataDir: "/var/lib/etcd", ClientPort: 12379, PeerPort: 12380},
		CNI:    CNISpec{Plugin: CNICalico, Manifest: "/srv/calico.yaml"},
		Bundle: &BundleRef{Version: "0.3.0+git4.1a2b3c4", SHA256: strings.Repeat("0f", 32)},
		Nodes:  []KubernetesNode{{Host: "compute-0", SRIOV: true, ReservedCPUs: "0-3", Taints: []string{"dedicated=nfv:NoSchedule", "example.com/gpu:NoExecute"}}}}
	if errs := m.Validate("site.yaml"); len(errs) > 0 {
		t.Fatal(errs)
	}
	e := k.Effective()
	if e.KubeVIPImage != "registry.local:5000/k8s/kube-vip:v0.9.2" || e.Etcd.DataDir != "/var/lib/etcd" || e.BootstrapTokenTTLHours != 2 {
		t.Errorf("effective: %+v", e)
	}
	d := KubernetesSpec{}.Effective()
	if d.Version != DefaultKubernetesVersion || d.CNI.Manifest != DefaultCNIManifest || !strings.HasPrefix(d.KubeVIPImage, "ghcr.io/") ||
		d.VIPProvider != VIPKeepalived {
		t.Errorf("defaults: %+v", d)
	}
}

func TestVIPProviderDefault(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   KubernetesSpec
		want string
	}{
		{"default", KubernetesSpec{}, VIPKeepalived},
		{"with an image repository", KubernetesSpec{ImageRepository: "registry.local:5000/k8s"}, VIPKeepalived},
		{"kubeVIPImage set: kube-vip, as before providers", KubernetesSpec{KubeVIPImage: "r/kube-vip:v0.9.2"}, VIPKubeVIP},
		{"explicit kube-vip", KubernetesSpec{VIPProvider: VIPKubeVIP}, VIPKubeVIP},
		{"explicit keepalived", KubernetesSpec{VIPProvider: VIPKeepalived}, VIPKeepalived},
	} {
		if got := tc.in.Effective().VIPProvider; got != tc.want {
			t.Errorf("%s: provider %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestCNIEffective(t *testing.T) {
	for _, tc := range []struct {
		in   CNISpec
		want CNISpec
	}{
		{CNISpec{}, CNISpec{Plugin: CNICalico, Manifest: DefaultCNIManifest}},
		{CNISpec{Plugin: CNICalico, Manifest: "/srv/calico.yaml"}, CNISpec{Plugin: CNICalico, Manifest: "/srv/calico.yaml"}},
		{CNISpec{Plugin: CNIFlannel}, CNISpec{Plugin: CNIFlannel}},
		{CNISpec{Plugin: CNINone}, CNISpec{Plugin: CNINone}},
	} {
		if got := (KubernetesSpec{CNI: tc.in}).Effective().CNI; got != tc.want {
			t.Errorf("Effective(%+v).CNI = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
