package kubeinstall

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/certreport"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/certs"
)

// expiryChanges reports kubeadm's control-plane certificates under dir that expire
// within `within` of now. They cannot be applied automatically: renewing restarts the
// control plane, which the operator schedules (docs/kubernetes.md). A step that finds
// one fails, so the site is Degraded well before the certificates lapse.
func expiryChanges(dir, node string, now time.Time, within time.Duration) []driver.Change {
	files := certreport.CertFiles(dir)
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
