package api

// CephSpec is filled in by the Ceph driver work.
type CephSpec struct {
	Monitors []string   `json:"monitors,omitempty"`
	Pools    []CephPool `json:"pools,omitempty"`
}

// CephPool is one RBD pool.
type CephPool struct {
	Name string `json:"name"`
	Size int    `json:"size,omitempty"`
}
