package kubeinstall

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/certs"
)

// certFiles are kubeadm's certificates under its PKI directory dir (etcd/ too).
func certFiles(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.crt"))
	more, _ := filepath.Glob(filepath.Join(dir, "*", "*.crt"))
	files = append(files, more...)
	sort.Strings(files)
	return files
}

// renewedKubeconfigs are the kubeconfigs `kubeadm certs renew all` renews; each
// embeds a client certificate.
var renewedKubeconfigs = []string{adminConf, superAdminConf, controllerManagerConf, schedulerConf}

// CertificateValidity reads the validity of kubeadm's certificates on this host
// (under root, "" for /): every certificate under /etc/kubernetes/pki, named by its
// path there, and the client certificates in the kubeconfigs kubeadm renews. Nil on
// a host kubeadm has not set up as a control plane. Files that cannot be read are
// left out: this is a report, and the kube steps check the files themselves.
func CertificateValidity(root string) []api.CertValidity {
	p := Paths{Root: root}
	dir := p.Join(pkiDir)
	var out []api.CertValidity
	for _, f := range certFiles(dir) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if c, err := certs.ParseCert(b); err == nil {
			rel, _ := filepath.Rel(dir, f)
			out = append(out, api.CertValidity{Name: rel, NotBefore: c.NotBefore, NotAfter: c.NotAfter})
		}
	}
	for _, k := range renewedKubeconfigs {
		cfg, err := clientcmd.LoadFromFile(p.Join(k))
		if err != nil {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(cfg.AuthInfos)) {
			if c, err := certs.ParseCert(cfg.AuthInfos[name].ClientCertificateData); err == nil {
				out = append(out, api.CertValidity{Name: filepath.Base(k), NotBefore: c.NotBefore, NotAfter: c.NotAfter})
				break
			}
		}
	}
	return out
}

// expiryChanges reports kubeadm's control-plane certificates under dir that expire
// within `within` of now. They cannot be applied automatically: renewing restarts the
// control plane, which the operator schedules (docs/kubernetes.md). A step that finds
// one fails, so the site is Degraded well before the certificates lapse.
func expiryChanges(dir, node string, now time.Time, within time.Duration) []driver.Change {
	files := certFiles(dir)
	var soonest *time.Time
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		c, err := certs.ParseCert(b)
		if err != nil || c.IsCA || c.NotAfter.Sub(now) >= within {
			continue
		}
		names = append(names, filepath.Base(f))
		if soonest == nil || c.NotAfter.Before(*soonest) {
			t := c.NotAfter
			soonest = &t
		}
	}
	if soonest == nil {
		return nil
	}
	left := soonest.Sub(now)
	what := fmt.Sprintf("expire in %d days (%s)", int(left.Hours()/24), soonest.UTC().Format(time.DateOnly))
	if left <= 0 {
		what = "have EXPIRED (" + soonest.UTC().Format(time.DateOnly) + ")"
	}
	return []driver.Change{{Summary: fmt.Sprintf("control-plane certificates on %s %s: %v; renew with `kubeadm certs renew all` "+
		"and restart the control plane, one controller at a time (docs/kubernetes.md)", node, what, names)}}
}
