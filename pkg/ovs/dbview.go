package ovs

import (
	"slices"
	"strings"

	lmodel "github.com/ovn-org/libovsdb/model"

	"github.com/plinth-dev/plinth/pkg/ovs/model"
)

// Ownership: what Plinth creates carries external_ids:plinth-owner=plinth, and only
// that is ever removed. Neutron's agents add their own ports to br-int; those are
// left alone even on a bridge Plinth created.
const (
	ownerKey   = "plinth-owner"
	ownerValue = "plinth"
)

// dbView is one consistent read of the four tables (one transaction; see db.read).
type dbView struct {
	root         *model.OpenvSwitch
	bridges      map[string]*model.Bridge // by name
	ports        map[string]*model.Port   // by UUID
	portByName   map[string]*model.Port
	ifaces       map[string]*model.Interface // by UUID
	ifaceByName  map[string]*model.Interface
	bridgeOfPort map[string]*model.Bridge // port UUID -> bridge
}

func newDBView() *dbView {
	return &dbView{
		bridges: map[string]*model.Bridge{}, ports: map[string]*model.Port{}, portByName: map[string]*model.Port{},
		ifaces: map[string]*model.Interface{}, ifaceByName: map[string]*model.Interface{},
		bridgeOfPort: map[string]*model.Bridge{},
	}
}

func (s *dbView) add(m lmodel.Model) {
	switch r := m.(type) {
	case *model.OpenvSwitch:
		s.root = r
	case *model.Bridge:
		s.bridges[r.Name] = r
		for _, p := range r.Ports {
			s.bridgeOfPort[p] = r
		}
	case *model.Port:
		s.ports[r.UUID] = r
		s.portByName[r.Name] = r
	case *model.Interface:
		s.ifaces[r.UUID] = r
		s.ifaceByName[r.Name] = r
	}
}

// portIfaces returns a port's interfaces that exist in the view.
func (s *dbView) portIfaces(p *model.Port) []*model.Interface {
	out := make([]*model.Interface, 0, len(p.Interfaces))
	for _, u := range p.Interfaces {
		if i := s.ifaces[u]; i != nil {
			out = append(out, i)
		}
	}
	return out
}

// bridgePorts returns a bridge's ports by name, leaving out its local port (named
// like the bridge), which OVS needs and nobody manages.
func (s *dbView) bridgePorts(b *model.Bridge) []*model.Port {
	var out []*model.Port
	for _, u := range b.Ports {
		if p := s.ports[u]; p != nil && p.Name != b.Name {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *model.Port) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// localIface is the bridge's own internal interface, or nil.
func (s *dbView) localIface(b *model.Bridge) *model.Interface {
	for _, u := range b.Ports {
		if p := s.ports[u]; p != nil && p.Name == b.Name {
			for _, i := range s.portIfaces(p) {
				if i.Name == b.Name {
					return i
				}
			}
		}
	}
	return nil
}

func owned(ids map[string]string) bool { return ids[ownerKey] == ownerValue }
