package api

// OVSSpec is filled in by the OVS-DPDK driver work.
type OVSSpec struct {
	DPDK bool `json:"dpdk,omitempty"`
}
