// Package certreport reads the validity of the certificates kubeadm keeps on a host,
// for the agent's host facts (the coordinators warn before they expire).
//
// It lives apart from pkg/kubeinstall so the long-running agent reads them every
// facts interval without linking client-go: kubeconfigs are parsed for the one field
// needed. The kubeadm paths it reads are defined here and used by kubeinstall.
package certreport

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/certs"
)

// kubeadm's fixed paths for its PKI and the kubeconfigs `kubeadm certs renew all`
// renews (each embeds a client certificate).
const (
	PKIDir                = "/etc/kubernetes/pki"
	AdminConf             = "/etc/kubernetes/admin.conf"
	SuperAdminConf        = "/etc/kubernetes/super-admin.conf"
	ControllerManagerConf = "/etc/kubernetes/controller-manager.conf"
	SchedulerConf         = "/etc/kubernetes/scheduler.conf"
)

// RenewedKubeconfigs are the kubeconfigs `kubeadm certs renew all` renews.
var RenewedKubeconfigs = []string{AdminConf, SuperAdminConf, ControllerManagerConf, SchedulerConf}

// CertFiles are kubeadm's certificates under its PKI directory dir (etcd/ too).
func CertFiles(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.crt"))
	more, _ := filepath.Glob(filepath.Join(dir, "*", "*.crt"))
	files = append(files, more...)
	sort.Strings(files)
	return files
}

// Validity reads the validity of kubeadm's certificates on this host (under root,
// "" for /): every certificate under PKIDir, named by its path there, and the client
// certificate of each renewed kubeconfig (its first user, by name, that has one). Nil
// on a host kubeadm has not set up as a control plane. Files that cannot be read are
// left out: this is a report, and the kube steps check the files themselves.
func Validity(root string) []api.CertValidity {
	join := func(p string) string { return filepath.Join(root, p) }
	dir := join(PKIDir)
	var out []api.CertValidity
	for _, f := range CertFiles(dir) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if c, err := certs.ParseCert(b); err == nil {
			rel, _ := filepath.Rel(dir, f)
			out = append(out, api.CertValidity{Name: rel, NotBefore: c.NotBefore, NotAfter: c.NotAfter})
		}
	}
	for _, k := range RenewedKubeconfigs {
		for _, pem := range clientCerts(join(k)) {
			if c, err := certs.ParseCert(pem); err == nil {
				out = append(out, api.CertValidity{Name: filepath.Base(k), NotBefore: c.NotBefore, NotAfter: c.NotAfter})
				break
			}
		}
	}
	return out
}

// kubeconfig is the part of a kubeconfig Validity reads.
type kubeconfig struct {
	Users []namedUser `json:"users"`
}

type namedUser struct {
	Name string `json:"name"`
	User struct {
		// JSON decodes base64 into bytes, as client-go does.
		ClientCertificateData []byte `json:"client-certificate-data"`
	} `json:"user"`
}

// clientCerts are the embedded client certificates of the kubeconfig at path, its
// users sorted by name; nothing if it cannot be read.
func clientCerts(path string) [][]byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(b, &kc); err != nil {
		return nil
	}
	slices.SortFunc(kc.Users, func(a, b namedUser) int { return strings.Compare(a.Name, b.Name) })
	var out [][]byte
	for _, u := range kc.Users {
		if len(u.User.ClientCertificateData) > 0 {
			out = append(out, u.User.ClientCertificateData)
		}
	}
	return out
}
