package api

// Defaults applied by Default. They are exported so the CLI can document them and
// Validate can reason about the values a zero field will take.
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
	DefaultChartNamespace    = "openstack"
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
}

// Default fills in unset site fields.
func (s *SiteSpec) Default() {
	p := &s.Policy
	setString(&p.Drift, DefaultDrift)
	setInt(&p.DriftCheckSeconds, DefaultDriftCheckSeconds)
	setInt(&p.MaxAttempts, DefaultMaxAttempts)
	setInt(&p.RetryBaseSeconds, DefaultRetryBaseSeconds)
	setInt(&p.RetryMaxSeconds, DefaultRetryMaxSeconds)
	for i := range s.Networks {
		setInt(&s.Networks[i].MTU, DefaultNetworkMTU)
	}
	if k := s.Kubernetes; k != nil {
		setString(&k.PodSubnet, DefaultPodSubnet)
		setString(&k.ServiceSubnet, DefaultServiceSubnet)
	}
	for i := range s.Charts {
		for j := range s.Charts[i].Charts {
			setString(&s.Charts[i].Charts[j].Namespace, DefaultChartNamespace)
		}
	}
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
		b := in.Bond
		setString(&b.Mode, DefaultBondMode)
		if b.Mode == BondLACP {
			setString(&b.LACPRate, DefaultBondLACPRate)
		}
		if b.Mode == BondLACP || b.Mode == BondBalanceXOR {
			setString(&b.HashPolicy, DefaultBondHashPolicy)
		}
		setInt(&b.MIIMon, DefaultBondMIIMon)
	case InterfaceMacvlan:
		if in.Macvlan == nil {
			in.Macvlan = &MacvlanOptions{}
		}
		setString(&in.Macvlan.Mode, DefaultMacvlanMode)
	case InterfaceVXLAN:
		if in.VXLAN != nil {
			setInt(&in.VXLAN.Port, DefaultVXLANPort)
		}
	}
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
