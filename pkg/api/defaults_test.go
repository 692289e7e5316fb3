package api

import "testing"

func TestDefault(t *testing.T) {
	m := &Manifest{
		Site: &Site{Spec: SiteSpec{
			Policy:     Policy{MaxAttempts: 9},
			Networks:   []Network{{Name: "a"}, {Name: "b", MTU: 9000}},
			Kubernetes: &KubernetesSpec{ServiceSubnet: "10.112.0.0/12"},
		}},
		Hosts: []Host{{Spec: HostSpec{Interfaces: []Interface{{Name: "eno1"}, {Name: "eno2", State: "down"}}}}},
	}
	m.Default()
	s := m.Site.Spec
	want := Policy{Drift: DriftRepair, DriftCheckSeconds: 60, MaxAttempts: 9, RetryBaseSeconds: 2, RetryMaxSeconds: 300}
	if s.Policy != want {
		t.Errorf("policy = %+v, want %+v", s.Policy, want)
	}
	if s.Networks[0].MTU != 1500 || s.Networks[1].MTU != 9000 {
		t.Errorf("network MTUs = %d, %d", s.Networks[0].MTU, s.Networks[1].MTU)
	}
	if k := s.Kubernetes; k.PodSubnet != "10.244.0.0/16" || k.ServiceSubnet != "10.112.0.0/12" {
		t.Errorf("kubernetes = %+v", k)
	}
	if i := m.Hosts[0].Spec.Interfaces; i[0].State != "up" || i[1].State != "down" {
		t.Errorf("interface states = %q, %q", i[0].State, i[1].State)
	}

	// Idempotent: a second pass changes nothing.
	before := SpecHash(m)
	m.Default()
	if after := SpecHash(m); after != before {
		t.Error("Default is not idempotent")
	}

	// Kubernetes stays absent when unset, and nil manifests are fine.
	empty := &Manifest{Site: &Site{}}
	empty.Default()
	if empty.Site.Spec.Kubernetes != nil {
		t.Error("Default invented a kubernetes section")
	}
	(*Manifest)(nil).Default()
}

func TestDefaultExampleIdempotent(t *testing.T) {
	m := example(t)
	m.Default()
	before := SpecHash(m)
	m.Default()
	if SpecHash(m) != before {
		t.Error("Default is not idempotent on the example")
	}
}

func TestSpecHash(t *testing.T) {
	a := HostSpec{Roles: []string{"worker"}, Labels: map[string]string{"x": "1", "y": "2"}}
	b := HostSpec{Roles: []string{"worker"}, Labels: map[string]string{"y": "2", "x": "1"}}
	if SpecHash(a) != SpecHash(b) {
		t.Error("equal specs hash differently")
	}
	if len(SpecHash(a)) != 64 {
		t.Errorf("hash %q is not hex sha256", SpecHash(a))
	}
	b.Roles = append(b.Roles, "storage")
	if SpecHash(a) == SpecHash(b) {
		t.Error("different specs hash equally")
	}
	if SpecHash(make(chan int)) != "" {
		t.Error("unencodable value should hash to empty")
	}
}
