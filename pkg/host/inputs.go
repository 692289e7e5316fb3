package host

// KindNetwork is the step kind for host networking.
const KindNetwork = "host.network"

// NetworkInputs is what the planner renders for a host.network step: the complete
// desired set of links, addresses and routes Plinth manages on one host.
type NetworkInputs struct {
	Links  []LinkSpec  `json:"links,omitempty"`
	Routes []RouteSpec `json:"routes,omitempty"`
}

// LinkSpec is one existing link to configure, found by Name or, when set, by MAC.
type LinkSpec struct {
	Name string `json:"name"`
	MAC  string `json:"mac,omitempty"`
	// MTU 0 leaves the MTU alone.
	MTU int `json:"mtu,omitempty"`
	// Up true brings the link up, false sets it down.
	Up bool `json:"up"`
	// Addresses in CIDR notation; Plinth adds missing ones and removes the ones it added
	// earlier that are no longer listed, never others.
	Addresses []string `json:"addresses,omitempty"`
}

// RouteSpec is one static route. Dst "default" or a CIDR.
type RouteSpec struct {
	Dst     string `json:"dst"`
	Gateway string `json:"gateway,omitempty"`
	Dev     string `json:"dev,omitempty"`
	Metric  int    `json:"metric,omitempty"`
	MTU     int    `json:"mtu,omitempty"`
	Table   int    `json:"table,omitempty"`
}
