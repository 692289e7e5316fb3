package state

import (
	"fmt"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
)

// benchSite is a site of n enrolled hosts, for measuring what one command costs.
func benchSite(b *testing.B, n int) *log {
	l := &log{t: &testing.T{}, s: New(nil), clock: t0}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("h%03d", i)
	}
	m := manifest(names...)
	for i := range m.Hosts {
		m.Hosts[i].Spec.ManagementAddress = fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)
	}
	if err := l.apply(CmdApplyManifest, ApplyManifest{Manifest: m}); err != nil {
		b.Fatal(err)
	}
	for _, h := range names {
		enrolled(l, h)
	}
	return l
}

// BenchmarkApplyRefresh200: one command (a reachability flip, which recomputes every
// host's and the site's conditions) on a 200-host site.
func BenchmarkApplyRefresh200(b *testing.B) {
	l := benchSite(b, 200)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st := api.ConditionTrue
		if i%2 == 0 {
			st = api.ConditionFalse
		}
		if err := l.apply(CmdSetReachable, SetReachable{Host: "h007", Status: st, Reason: "Bench"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCertificatesDue200: the leader's once-a-second expiry check on 200 hosts.
func BenchmarkCertificatesDue200(b *testing.B) {
	l := benchSite(b, 200)
	v := l.view()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if v.CertificatesDue(l.clock) {
			b.Fatal("due")
		}
	}
}
