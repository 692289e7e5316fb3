package api

// Defaults applied by Default and the Effective methods. This package is the one home
// of every manifest default: the planner's renderers call these functions instead of
// filling zeros themselves, and the JSON schema (pkg/api/schema) reads the defaults by
// running them. The values are exported so the CLI can document them and Validate can
// reason about the values a zero field will take.
const (
	DefaultDrift             = DriftRepair
	DefaultDriftCheckSeconds = 60
	DefaultMaxAttempts       = 5
	DefaultRetryBaseSeconds  = 2
	DefaultRetryMaxSeconds   = 300
	DefaultInterfaceState    = "up"
	DefaultInterfaceType     = InterfaceEthernet
	DefaultBondMode          = BondLACP
	DefaultBondLACPRate      = "slow"
	DefaultBondHashPolicy    = "layer2"
	DefaultBondMIIMon        = 100
	DefaultMacvlanMode       = "bridge"
	DefaultVXLANPort         = 4789
	DefaultNetworkMTU        = 1500
	DefaultPodSubnet         = "10.244.0.0/16"
	DefaultServiceSubnet     = "10.96.0.0/12"
	// An application chart's wait and remediation (DefaultChartTimeout and
	// DefaultChartNamespace are beside the Application types).
	DefaultChartWait    = WaitAll
	DefaultRemediation  = RemediateRollback
	DefaultNodesGateMin = 1
)

// Default fills in unset fields. It only ever replaces zero values, so it is idempotent
// and an operator's explicit choice always wins; the coordinator can therefore run it on
// every manifest it stores without changing a spec hash the second time.
func (m *Manifest) Default() {
	if m == nil {
		return
	}
	if m.Site != nil {
		m.Site.Spec.Default()
	}
	for i := range m.Hosts {
		m.Hosts[i].Spec.Default()
	}
	for i := range m.Applications {
		m.Applications[i].Spec.Default()
	}
}

// Default fills in every chart's release, namespace, wait and remediation, and the
// node count of every nodesLabelled gate.
func (a *ApplicationSpec) Default() {
	for i := range a.Groups {
		g := &a.Groups[i]
		for j := range g.Gates {
			if n := g.Gates[j].NodesLabelled; n != nil {
				*n = n.Effective()
			}
		}
		for j := range g.Charts {
			g.Charts[j] = g.Charts[j].Effective()
		}
	}
}

// Effective returns the chart with its defaults: the release is named after the
// chart, in namespace openstack, waiting for all its resources up to
// DefaultChartTimeout, rolled back when it fails. Values are shared, not copied.
func (c Chart) Effective() Chart {
	setString(&c.Release, c.Name)
	setString(&c.Namespace, DefaultChartNamespace)
	c.Wait = c.Wait.Effective()
	setString(&c.Remediation, DefaultRemediation)
	return c
}

// Effective returns the wait policy with its defaults.
func (w ChartWait) Effective() ChartWait {
	setString(&w.For, DefaultChartWait)
	setInt(&w.TimeoutSeconds, DefaultChartTimeout)
	return w
}

// Effective returns the gate with its default node count.
func (n NodesGate) Effective() NodesGate {
	setInt(&n.Min, DefaultNodesGateMin)
	return n
}

// Default fills in unset site fields.
func (s *SiteSpec) Default() {
	s.Policy = s.Policy.Effective()
	for i := range s.Networks {
		setInt(&s.Networks[i].MTU, DefaultNetworkMTU)
	}
	if k := s.Kubernetes; k != nil {
		setString(&k.PodSubnet, DefaultPodSubnet)
		setString(&k.ServiceSubnet, DefaultServiceSubnet)
	}
}

// Effective returns the policy with every zero field set to its default. Only zeros:
// a negative value stays for Validate to refuse.
func (p Policy) Effective() Policy {
	setString(&p.Drift, DefaultDrift)
	setInt(&p.DriftCheckSeconds, DefaultDriftCheckSeconds)
	setInt(&p.MaxAttempts, DefaultMaxAttempts)
	setInt(&p.RetryBaseSeconds, DefaultRetryBaseSeconds)
	setInt(&p.RetryMaxSeconds, DefaultRetryMaxSeconds)
	return p
}

// Default fills in unset host fields.
func (h *HostSpec) Default() {
	for i := range h.Interfaces {
		h.Interfaces[i].Default()
	}
}

// Default fills in an interface's state and type, and the options of its type.
func (in *Interface) Default() {
	setString(&in.State, DefaultInterfaceState)
	setString(&in.Type, DefaultInterfaceType)
	switch in.Type {
	case InterfaceBond:
		if in.Bond == nil {
			in.Bond = &BondOptions{}
		}
		*in.Bond = in.Bond.Effective()
	case InterfaceMacvlan:
		if in.Macvlan == nil {
			in.Macvlan = &MacvlanOptions{}
		}
		*in.Macvlan = in.Macvlan.Effective()
	case InterfaceVXLAN:
		if in.VXLAN != nil {
			*in.VXLAN = in.VXLAN.Effective()
		}
	}
}

// Effective returns the bond options with the defaults of their mode: 802.3ad, its
// LACP rate, a hash policy for the modes that balance, and the MII monitor interval.
func (b BondOptions) Effective() BondOptions {
	setString(&b.Mode, DefaultBondMode)
	if b.Mode == BondLACP {
		setString(&b.LACPRate, DefaultBondLACPRate)
	}
	if b.Mode == BondLACP || b.Mode == BondBalanceXOR {
		setString(&b.HashPolicy, DefaultBondHashPolicy)
	}
	setInt(&b.MIIMon, DefaultBondMIIMon)
	return b
}

// Effective returns the macvlan options with the default mode.
func (m MacvlanOptions) Effective() MacvlanOptions {
	setString(&m.Mode, DefaultMacvlanMode)
	return m
}

// Effective returns the VXLAN options with the default (IANA) port.
func (x VXLANOptions) Effective() VXLANOptions {
	setInt(&x.Port, DefaultVXLANPort)
	return x
}

func setString(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

func setInt(p *int, v int) {
	if *p == 0 {
		*p = v
	}
}
