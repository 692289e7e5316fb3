package coordinator_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/state"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// The leader records the site CA's and every coordinator's certificate validity,
// the joined one's as Raft's TLS handshake showed it: `describe site` lists them all,
// `describe host` a controller's own coordinator certificate, and the site's
// CAExpiring and CertificateExpiring conditions are judged (False: all are fresh).
func TestLeaderRecordsCertificates(t *testing.T) {
	c := newCluster(t)
	site := `apiVersion: plinth.dev/v1alpha1
kind: Site
metadata: {name: lab}
spec: {controllers: [c0]}
---
apiVersion: plinth.dev/v1alpha1
kind: Host
metadata: {name: c0}
spec:
  roles: [controller]
  managementAddress: 127.0.0.1
  interfaces: [{name: lo, mtu: 1500}]
`
	var resp wire.ApplyResponse
	if _, err := c.admins[0].Do(c.ctx, "POST", wire.PathApply, wire.ApplyRequest{File: "site.yaml", YAML: site}, &resp); err != nil {
		t.Fatalf("apply: %v", err)
	}
	var d state.SiteDetail
	poll.Until(t, 30*time.Second, "both coordinators' certificates recorded", func() error {
		if _, err := c.admins[1].Do(c.ctx, "GET", "/v1/site/lab", nil, &d); err != nil {
			return err
		}
		var names []string
		for _, cert := range d.Certificates {
			names = append(names, cert.Name)
		}
		if fmt.Sprint(names) != "[site CA coordinator c0 coordinator c1]" {
			return fmt.Errorf("certificates %v", names)
		}
		return nil
	})
	for _, cert := range d.Certificates {
		if left := time.Until(cert.NotAfter); left < 300*24*time.Hour {
			t.Errorf("%s expires in %v", cert.Name, left)
		}
	}
	for _, typ := range []string{api.ConditionCAExpiring, api.ConditionCertificateExpiring} {
		if cond := plan.Find(d.Site.Site.Status.Conditions, typ); cond == nil || cond.Status != api.ConditionFalse {
			t.Errorf("%s: %+v", typ, cond)
		}
	}
	var h state.HostDetail
	if _, err := c.admins[0].Do(c.ctx, "GET", "/v1/hosts/c0", nil, &h); err != nil {
		t.Fatal(err)
	}
	if len(h.Certificates) != 2 || h.Certificates[0].Name != plan.CertCoordinator || h.Certificates[1].Name != plan.CertSiteCA {
		t.Fatalf("describe host c0 certificates: %+v", h.Certificates)
	}
	if cond := plan.Find(h.Host.Host.Status.Conditions, api.ConditionCertificateExpiring); cond == nil || cond.Status != api.ConditionFalse {
		t.Fatalf("c0 CertificateExpiring: %+v", cond)
	}
}
