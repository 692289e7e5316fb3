package api

// ovs validates site.spec.ovs; the OVS-DPDK work fills it in.
func (v *validator) ovs(o *OVSSpec) {}
