package state

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/plinth-dev/plinth/internal/sitetest"
	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// benchSite is a site of n enrolled hosts, for measuring what one command costs.
func benchSite(b *testing.B, n int) *log {
	l := &log{t: &testing.T{}, s: New(nil), clock: t0, fast: true}
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

// BenchmarkApplyRefresh200: one command (a reachability flip: its host's conditions
// and the site's roll-up recomputed) on a 200-host site.
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

// BenchmarkDryRunApply1000: the dry run behind every apply (its plan) of a manifest
// changing one host, on a 1000-host site.
func BenchmarkDryRunApply1000(b *testing.B) {
	l := benchSite(b, 1000)
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("h%03d", i)
	}
	m := manifest(names...)
	for i := range m.Hosts {
		m.Hosts[i].Spec.ManagementAddress = fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)
	}
	m.Hosts[999].Metadata.Labels = map[string]string{"bench": "changed"}
	data, err := Encode(CmdApplyManifest, l.clock, ApplyManifest{Manifest: m})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.s.DryRun(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEnroll1000: one enrolment (its token, then the enrolment itself) on a
// 1000-host site; enrolling a whole site is N of these.
func BenchmarkEnroll1000(b *testing.B) {
	l := benchSite(b, 1000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		host, id := fmt.Sprintf("h%03d", i%1000), fmt.Sprintf("t-bench-%d", i)
		if err := l.apply(CmdCreateToken, CreateToken{Token: TokenRecord{ID: id, SecretHash: "h", Name: host, Role: "agent", Expires: l.clock.Add(time.Hour)}}); err != nil {
			b.Fatal(err)
		}
		if err := l.apply(CmdEnroll, Enroll{TokenID: id, SecretHash: "h", Name: host, Role: "agent", Serial: "s-bench-" + id, NotAfter: l.clock.Add(24 * time.Hour)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReportFacts200: one agent's facts report that changed (a new hash: a
// real write) on a 200-host site — the FSM's share of a facts overwrite in
// bench-consensus.
func BenchmarkReportFacts200(b *testing.B) {
	l := benchSite(b, 200)
	f := hostspec.Facts{Hostname: "h007", KernelRelease: "6.1.0-bench", CPUs: 32, Links: []hostspec.LinkFact{{Name: "lo"}}}
	cpus := make([]int, 32)
	for i := range cpus {
		cpus[i] = i
	}
	f.NUMANodes = []hostspec.NUMANode{{ID: 0, CPUs: cpus[:16]}, {ID: 1, CPUs: cpus[16:]}}
	for i := range 8 {
		f.Links = append(f.Links, hostspec.LinkFact{Name: fmt.Sprintf("eth%d", i), Kind: "device"})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.KernelRelease = fmt.Sprintf("6.1.%d-bench", i)
		raw, err := json.Marshal(f)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.apply(CmdReportFacts, ReportFacts{Host: "h007", Facts: raw, Hash: f.Hash()}); err != nil {
			b.Fatal(err)
		}
	}
}

// kubeSite1000 is a Kubernetes site of 1000 workers with its first controller
// enrolled: the controller holds a label step for every node.
func kubeSite1000(b *testing.B) *log {
	workers := make([]string, 1000)
	for i := range workers {
		workers[i] = fmt.Sprintf("w-%04d", i)
	}
	m, err := api.Decode("site.yaml", []byte(sitetest.Kube("ctl-0", workers...)))
	if err != nil {
		b.Fatal(err)
	}
	l := &log{t: &testing.T{}, s: New(nil), clock: t0, fast: true}
	if err := l.apply(CmdApplyManifest, ApplyManifest{Manifest: *m}); err != nil {
		b.Fatal(err)
	}
	enrolled(l, "ctl-0")
	if n := len(l.view().Steps("ctl-0")); n < 1000 {
		b.Fatalf("ctl-0 holds %d steps", n)
	}
	return l
}

// BenchmarkControllerChangedSince1000: what a sparse answer to the first
// controller's agent reads after one command about it, against walking all its
// steps as every answer did before (the sub-benchmarks, on a 1000-worker site).
func BenchmarkControllerChangedSince1000(b *testing.B) {
	l := kubeSite1000(b)
	since := l.idx
	if err := l.apply(CmdSetReachable, SetReachable{Host: "ctl-0", Status: api.ConditionFalse, Reason: "Bench"}); err != nil {
		b.Fatal(err)
	}
	v := l.view()
	b.Run("changed", func(b *testing.B) {
		for b.Loop() {
			n := 0
			v.EachHostStepChangedSince("ctl-0", since, func(plan.Record) { n++ })
		}
	})
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			n := 0
			v.EachHostStep("ctl-0", func(r plan.Record) {
				if r.ModifyIndex > since || hasSecretRefs(&r) {
					n++
				}
			})
		}
	})
}

// BenchmarkControllerRefresh1000: one command about the first controller (a
// reachability flip) on a Kubernetes site of 1000 workers, where the controller
// holds a label step for every node: its conditions read 1000+ step records.
func BenchmarkControllerRefresh1000(b *testing.B) {
	l := kubeSite1000(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st := api.ConditionTrue
		if i%2 == 0 {
			st = api.ConditionFalse
		}
		if err := l.apply(CmdSetReachable, SetReachable{Host: "ctl-0", Status: st, Reason: "Bench"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyOneHost1000: an apply of a 1000-host file that changes one host's
// labels, on a site whose hosts have all reported facts, as every member's FSM runs
// it (decode, apply, replan, answer). "whole" is the file as the command (what the
// log carried before View.ApplyOf), "ApplyOf" the command the leader proposes now;
// the ratio of the two is the saving per member. Entry bytes are reported as B/entry.
func BenchmarkApplyOneHost1000(b *testing.B) {
	for _, mode := range []string{"whole", "ApplyOf"} {
		b.Run(mode, func(b *testing.B) {
			l := benchSite(b, 1000)
			names := make([]string, 1000)
			for i := range names {
				names[i] = fmt.Sprintf("h%03d", i)
				f := hostspec.Facts{Hostname: names[i], KernelRelease: "6.1.0-bench", CPUs: 32, Links: []hostspec.LinkFact{{Name: "lo"}, {Name: "eth1", Kind: "device"}}}
				f.NUMANodes = []hostspec.NUMANode{{ID: 0, CPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}, {ID: 1, CPUs: []int{8, 9, 10, 11, 12, 13, 14, 15}}}
				raw, err := json.Marshal(f)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.apply(CmdReportFacts, ReportFacts{Host: names[i], Facts: raw, Hash: f.Hash()}); err != nil {
					b.Fatal(err)
				}
			}
			m := manifest(names...)
			for i := range m.Hosts {
				m.Hosts[i].Spec.ManagementAddress = fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)
			}
			m.Default()
			var bytes int
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m.Hosts[999].Metadata.Labels = map[string]string{"bench": fmt.Sprint(i % 2)}
				cmd := ApplyManifest{Manifest: m}
				if mode == "ApplyOf" {
					cmd = l.view().ApplyOf("", &m)
				}
				data, err := Encode(CmdApplyManifest, l.clock, cmd)
				if err != nil {
					b.Fatal(err)
				}
				bytes += len(data)
				l.idx++
				if err, ok := l.s.Apply(&raft.Log{Index: l.idx, Type: raft.LogCommand, Data: data}).(error); ok {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "B/entry")
		})
	}
}
