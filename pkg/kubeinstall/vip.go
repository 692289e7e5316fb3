package kubeinstall

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// VIPManifest renders the kube-vip static pod that holds the control-plane VIP on
// the controllers (ARP, leader election through the API). On the first control
// plane it reads super-admin.conf: until kubeadm init has bound admin.conf's group,
// admin.conf has no rights, and the VIP must be up for init to reach the API.
func VIPManifest(in kubespec.VIPInputs) ([]byte, error) {
	kubeconfig := adminConf
	if in.FirstControlPlane {
		kubeconfig = superAdminConf
	}
	env := []corev1.EnvVar{
		{Name: "address", Value: in.VIP},
		{Name: "port", Value: strconv.Itoa(in.Port)},
		{Name: "vip_arp", Value: "true"},
		{Name: "vip_cidr", Value: "32"},
		{Name: "cp_enable", Value: "true"},
		{Name: "cp_namespace", Value: "kube-system"},
		{Name: "vip_leaderelection", Value: "true"},
		{Name: "vip_leasename", Value: "plndr-cp-lock"},
		{Name: "vip_leaseduration", Value: "5"},
		{Name: "vip_renewdeadline", Value: "3"},
		{Name: "vip_retryperiod", Value: "1"},
	}
	if in.Interface != "" {
		env = append(env, corev1.EnvVar{Name: "vip_interface", Value: in.Interface})
	}
	pod := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "kube-vip", Namespace: "kube-system", Labels: map[string]string{"app.kubernetes.io/managed-by": "plinth"}},
		Spec: corev1.PodSpec{
			HostNetwork: true,
			HostAliases: []corev1.HostAlias{{IP: "127.0.0.1", Hostnames: []string{"kubernetes"}}},
			Containers: []corev1.Container{{
				Name: "kube-vip", Image: in.Image, ImagePullPolicy: corev1.PullIfNotPresent,
				Args: []string{"manager"}, Env: env,
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{
					Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "kubeconfig", MountPath: adminConf}},
			}},
			Volumes: []corev1.Volume{{Name: "kubeconfig", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: kubeconfig}}}},
		},
	}
	return marshalDocs(pruned{v: pod})
}

// VIPDriver runs kube.vip: it holds the control-plane VIP on a controller, before
// kubeadm runs (kubeadm init reaches its own API through the VIP) and afterwards,
// with the site's provider: keepalived (Debian's unit, Plinth's config) or the
// kube-vip static pod, which kubelet runs once kubeadm starts it.
type VIPDriver struct{ o *options }

// NewVIPDriver returns the kube.vip driver.
func NewVIPDriver(stateDir string, opts ...Option) *VIPDriver {
	return &VIPDriver{o: newOptions(stateDir, opts)}
}

// Kind implements driver.Driver.
func (d *VIPDriver) Kind() string { return kubespec.KindVIP }

// Diff implements driver.Driver.
func (d *VIPDriver) Diff(ctx context.Context, raw json.RawMessage) ([]driver.Change, error) {
	var in kubespec.VIPInputs
	if err := driver.DecodeInputs(d.Kind(), raw, &in); err != nil {
		return nil, err
	}
	switch in.Provider {
	case kubespec.VIPKeepalived:
		return d.keepalived(ctx, in)
	case "", kubespec.VIPKubeVIP:
		return d.kubeVIP(in)
	}
	return nil, driver.Permanent(fmt.Errorf("kube.vip: provider %q is not valid; valid providers are %s, %s",
		in.Provider, kubespec.VIPKeepalived, kubespec.VIPKubeVIP))
}

// kubeVIP keeps the kube-vip static pod manifest in place (and Plinth's keepalived
// gone, after a change of provider).
func (d *VIPDriver) kubeVIP(in kubespec.VIPInputs) ([]driver.Change, error) {
	if in.VIP == "" || in.Image == "" || in.Port == 0 {
		return nil, driver.Permanent(fmt.Errorf("kube.vip: inputs need vip, port and image"))
	}
	data, err := VIPManifest(in)
	if err != nil {
		return nil, driver.Permanent(err)
	}
	cs := d.stopKeepalived()
	path := d.o.paths.Join(vipManifest)
	if sameFile(path, data) {
		return cs, nil
	}
	return append(cs, driver.Change{
		Summary: fmt.Sprintf("write kube-vip static pod %s (VIP %s:%d on %s)", path, in.VIP, in.Port, orAuto(in.Interface)),
		Apply:   func(context.Context) error { return writeFile(path, data, 0o600) },
	}), nil
}

func orAuto(ifc string) string {
	if ifc == "" {
		return "the interface kube-vip detects"
	}
	return ifc
}
