package kubeinstall

import (
	"path/filepath"

	"github.com/plinth-dev/plinth/pkg/kubeinstall/certreport"
)

// Host paths. kubeadm's own are fixed by kubeadm; Plinth's live under /etc/plinth so
// that `kubeadm reset` never removes them.
const (
	manifestsDir      = "/etc/kubernetes/manifests"
	pkiDir            = certreport.PKIDir
	adminConf         = certreport.AdminConf
	superAdminConf    = certreport.SuperAdminConf
	kubeletConf       = "/etc/kubernetes/kubelet.conf"
	kubeletConfigFile = "/var/lib/kubelet/config.yaml"
	apiServerManifest = manifestsDir + "/kube-apiserver.yaml"
	vipManifest       = manifestsDir + "/kube-vip.yaml"

	kubeadmDir   = "/etc/plinth/kubeadm"
	patchesDir   = "/etc/plinth/kubeadm/patches"
	etcdPKIDir   = "/etc/plinth/etcd/pki"
	etcdConfig   = "/etc/plinth/etcd/etcd.yaml"
	etcdUnitName = "plinth-etcd.service"
	etcdUnitPath = "/etc/systemd/system/plinth-etcd.service"

	// keepalived (kube.vip's default provider) is Debian's package and unit.
	keepalivedConf = "/etc/keepalived/keepalived.conf"
	keepalivedUnit = "keepalived.service"
)

// The control-plane components' kubeconfigs, renewed by `kubeadm certs renew all`.
const (
	controllerManagerConf = certreport.ControllerManagerConf
	schedulerConf         = certreport.SchedulerConf
)

// Paths places every host path under Root; Root is empty on a real host and a
// temporary directory in tests.
type Paths struct {
	Root string
}

// Join returns the host path p under Root.
func (p Paths) Join(path string) string {
	if p.Root == "" {
		return path
	}
	return filepath.Join(p.Root, path)
}

// etcdFile is a file of the etcd member's PKI.
func (p Paths) etcdFile(name string) string { return p.Join(filepath.Join(etcdPKIDir, name)) }
