package state

import (
	"bytes"
	"slices"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// poolManifest gives every host an eth2 that takes an address from network stor.
func poolManifest(hosts ...string) api.Manifest {
	m := manifest(hosts...)
	m.Site.Spec.Networks = []api.Network{{Name: "stor", Role: api.NetworkOther, CIDR: "10.5.0.0/24",
		Pool: &api.AddressPool{Start: "10.5.0.100", End: "10.5.0.200"}}}
	for i := range m.Hosts {
		m.Hosts[i].Spec.Interfaces = append(m.Hosts[i].Spec.Interfaces, api.Interface{Name: "eth2", Networks: []string{"stor"}, Allocate: true})
	}
	return m
}

// Allocations live in the replicated state: a host added later whose name sorts
// first takes a new address instead of another host's, and a replay or a restored
// snapshot holds the same allocations.
func TestAllocationsAreRecorded(t *testing.T) {
	l := newLog(t)
	l.must(CmdApplyManifest, ApplyManifest{Manifest: poolManifest("c0", "w1")})
	first := l.view().Allocations()
	want := []plan.Allocation{{Network: "stor", Host: "c0", Address: "10.5.0.100"}, {Network: "stor", Host: "w1", Address: "10.5.0.101"}}
	if !slices.Equal(first, want) {
		t.Fatalf("allocations %v, want %v", first, want)
	}
	m := poolManifest("a0", "c0", "w1")
	m.Site.Spec.Controllers = []string{"c0"}
	m.Hosts[0].Spec.Roles, m.Hosts[1].Spec.Roles = []string{api.RoleWorker}, []string{api.RoleController}
	l.must(CmdApplyManifest, ApplyManifest{Manifest: m})
	got := l.view().Allocations()
	if want := append(want, plan.Allocation{Network: "stor", Host: "a0", Address: "10.5.0.102"}); len(got) != 3 || !slices.Contains(got, want[0]) || !slices.Contains(got, want[1]) || !slices.Contains(got, want[2]) {
		t.Fatalf("after adding a0: %v", got)
	}
	var events int
	for _, e := range l.view().Events(0) {
		if e.Reason == "AddressAllocated" {
			events++
		}
	}
	if events != 3 {
		t.Errorf("%d AddressAllocated events, want 3", events)
	}

	replay := New(nil)
	for i, c := range l.cmds {
		replay.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: c})
	}
	a, _ := l.s.Export()
	b, _ := replay.Export()
	c, _ := snapshotRoundTrip(t, l.s).Export()
	if !bytes.Equal(a, b) || !bytes.Equal(a, c) || !bytes.Contains(c, []byte(`"allocations"`)) {
		t.Fatalf("replay or restore differs, or lacks allocations:\n%s\n%s\n%s", a, b, c)
	}
}
