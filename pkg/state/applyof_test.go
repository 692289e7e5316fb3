package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
)

// applyOfSite is a three-host site, enrolled, that an apply changes.
func applyOfSite(t *testing.T) *log {
	l := newLog(t)
	l.must(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: manifest("c0", "w1", "w2")})
	for _, h := range []string{"c0", "w1", "w2"} {
		enrolled(l, h)
	}
	return l
}

func hostNames(m api.Manifest) []string {
	var out []string
	for _, h := range m.Hosts {
		out = append(out, h.Metadata.Name)
	}
	return out
}

// tablesJSON is everything the state stores (what a snapshot holds).
func tablesJSON(t *testing.T, s *Store) []byte {
	t.Helper()
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, err := json.Marshal(s.t)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The command ApplyOf builds leaves out what the state already declares as it is,
// and applying it does exactly what applying the whole file does: the same answer,
// the same stored state, event for event.
func TestApplyOfLogsOnlyWhatChanged(t *testing.T) {
	cases := []struct {
		name      string
		edit      func(m *api.Manifest)
		wantSite  bool
		wantHosts []string
		whole     bool                  // nothing left out: the file as it is, without a Base
		before    func(m *api.Manifest) // applied to both sites first, when set
	}{
		{name: "nothing changed", edit: func(*api.Manifest) {}},
		{name: "a label", edit: func(m *api.Manifest) { m.Hosts[2].Metadata.Labels = map[string]string{"rack": "r2"} }, wantHosts: []string{"w2"}},
		{name: "a host's spec", edit: func(m *api.Manifest) { m.Hosts[1].Spec.Interfaces[0].MTU = 9000 }, wantHosts: []string{"w1"}},
		{name: "a new host", edit: func(m *api.Manifest) {
			h := m.Hosts[2]
			h.Metadata.Name, h.Spec.ManagementAddress = "w3", "10.0.0.9"
			m.Hosts = append(m.Hosts, h)
		}, wantHosts: []string{"w3"}},
		{name: "the site", edit: func(m *api.Manifest) { m.Site.Spec.Policy.DriftCheckSeconds = 600 }, wantSite: true},
		{name: "a file of one changed host", edit: func(m *api.Manifest) {
			m.Site = nil
			m.Hosts = m.Hosts[1:2]
			m.Hosts[0].Metadata.Labels = map[string]string{"rack": "r1"}
		}, wantHosts: []string{"w1"}, whole: true},
		{name: "a label removed again (labels in the state, none in the file)", edit: func(m *api.Manifest) {}, wantHosts: []string{"w2"},
			before: func(m *api.Manifest) { m.Hosts[2].Metadata.Labels = map[string]string{"rack": "r2"} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			whole, delta := applyOfSite(t), applyOfSite(t)
			if tc.before != nil {
				for _, l := range []*log{whole, delta} {
					m := manifest("c0", "w1", "w2")
					tc.before(&m)
					l.must(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: m})
				}
			}
			m := manifest("c0", "w1", "w2")
			tc.edit(&m)
			m.Default()
			cmd := delta.view().ApplyOf("site.yaml", &m)
			if want := delta.idx; tc.whole && cmd.Base != 0 || !tc.whole && cmd.Base != want {
				t.Errorf("base %d, want %d (whole file: %v)", cmd.Base, want, tc.whole)
			}
			if (cmd.Manifest.Site != nil) != tc.wantSite {
				t.Errorf("site in the command: %v, want %v", cmd.Manifest.Site != nil, tc.wantSite)
			}
			if got := hostNames(cmd.Manifest); !slices.Equal(got, tc.wantHosts) {
				t.Errorf("hosts in the command %v, want %v", got, tc.wantHosts)
			}
			a := whole.answer(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: m})
			b := delta.answer(CmdApplyManifest, cmd)
			if err, ok := b.(error); ok {
				t.Fatalf("delta refused: %v", err)
			}
			if !slices.Equal(a.(Plan), b.(Plan)) {
				t.Errorf("plans differ:\nwhole %q\ndelta %q", a, b)
			}
			if !bytes.Equal(tablesJSON(t, whole.s), tablesJSON(t, delta.s)) {
				t.Errorf("stored state differs after the whole file and after its delta")
			}
		})
	}
}

// A command left out what the state declared at its Base. After a declaration
// changes it is refused, and nothing of it is applied; commands that change no
// declaration (facts, reachability, enrolment) leave it valid.
func TestApplyOfRefusedOnceDeclarationsMoved(t *testing.T) {
	changeW2 := func(m *api.Manifest) { m.Hosts[2].Metadata.Labels = map[string]string{"rack": "r2"} }
	cases := []struct {
		name    string
		between func(l *log)
		refused bool
	}{
		{name: "facts and reachability", between: func(l *log) {
			reportLinks(l, "w1", "eth1")
			l.must(CmdSetReachable, SetReachable{Host: "w1", Status: api.ConditionFalse, Reason: "GossipDead"})
			l.must(CmdCreateToken, CreateToken{Token: TokenRecord{ID: "t-x", SecretHash: "h", Name: "w9", Role: "agent", Expires: l.clock.Add(3600e9)}})
		}},
		{name: "the same file applied", between: func(l *log) {
			l.must(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: manifest("c0", "w1", "w2")})
		}},
		{name: "another host changed", refused: true, between: func(l *log) {
			m := manifest("c0", "w1", "w2")
			m.Hosts[1].Spec.Interfaces[0].MTU = 9000
			l.must(CmdApplyManifest, ApplyManifest{File: "other.yaml", Manifest: m})
		}},
		{name: "the site changed", refused: true, between: func(l *log) {
			m := manifest("c0", "w1", "w2")
			m.Site.Spec.Policy.DriftCheckSeconds = 600
			l.must(CmdApplyManifest, ApplyManifest{File: "other.yaml", Manifest: m})
		}},
		{name: "a host deleted", refused: true, between: func(l *log) {
			l.must(CmdDeleteHost, DeleteHost{Name: "w1"})
		}},
		{name: "the state restored", refused: true, between: func(l *log) {
			snap, err := l.s.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			sink := &memSink{}
			if err := snap.Persist(sink); err != nil {
				t.Fatal(err)
			}
			l.must(CmdRestore, Restore{Snapshot: sink.Bytes()})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := applyOfSite(t)
			m := manifest("c0", "w1", "w2")
			changeW2(&m)
			m.Default()
			cmd := l.view().ApplyOf("site.yaml", &m)
			tc.between(l)
			before := l.view()
			err := l.apply(CmdApplyManifest, cmd)
			if !tc.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				h, _ := l.view().Host("w2")
				if h.Host.Metadata.Labels["rack"] != "r2" {
					t.Fatalf("w2's labels %v after the apply", h.Host.Metadata.Labels)
				}
				return
			}
			if !errors.Is(err, ErrDeclarationsMoved) {
				t.Fatalf("got %v, want ErrDeclarationsMoved", err)
			}
			if h, ok := l.view().Host("w2"); ok && h.Host.Metadata.Labels["rack"] != "" {
				t.Errorf("a refused apply changed w2's labels to %v", h.Host.Metadata.Labels)
			}
			if l.view().t.DeclaredIndex != before.t.DeclaredIndex {
				t.Errorf("a refused apply moved the declared index")
			}
		})
	}
}

// Whatever the tables store survives a snapshot: a field missed by decodeSnapshot
// would make a restored follower decide commands differently from the leader.
func TestSnapshotKeepsEveryStoredField(t *testing.T) {
	l := applyOfSite(t)
	m := manifest("c0", "w1", "w2")
	m.Hosts[2].Metadata.Labels = map[string]string{"rack": "r2"}
	l.must(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: m})
	reportLinks(l, "w1", "eth1")
	if l.view().t.DeclaredIndex == 0 {
		t.Fatal("no declared index to keep")
	}
	restored := snapshotRoundTrip(t, l.s)
	if a, b := tablesJSON(t, l.s), tablesJSON(t, restored); !bytes.Equal(a, b) {
		t.Errorf("the restored state differs:\nbefore %s\nafter  %s", a, b)
	}
}
