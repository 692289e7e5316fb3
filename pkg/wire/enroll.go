package wire

// EnrollRequest is sent by a host joining with a token, over the join port.
type EnrollRequest struct {
	Token string   `json:"token"`
	Name  string   `json:"name"`
	CSR   string   `json:"csr"`
	IPs   []string `json:"ips,omitempty"`
}

// EnrollResponse hands the new member its identity and what it needs to take part.
type EnrollResponse struct {
	Cert   string      `json:"cert"`
	CA     string      `json:"ca"`
	Config AgentConfig `json:"config"`
	// Coordinators joining the cluster also receive the keys every coordinator holds.
	CAKey   string `json:"caKey,omitempty"`
	DataKey []byte `json:"dataKey,omitempty"`
}

// RaftJoinRequest asks the leader to add the calling coordinator as a voter.
type RaftJoinRequest struct {
	Name       string `json:"name"`
	RaftAddr   string `json:"raftAddr"`
	APIAddr    string `json:"apiAddr"`
	GossipAddr string `json:"gossipAddr,omitempty"`
	Witness    bool   `json:"witness,omitempty"`
}

// Applied is the leader's answer to a write forwarded by another coordinator.
type Applied struct {
	Index uint64 `json:"index"`
	// Plan is what an applied manifest changed (the FSM's answer); none for
	// other commands.
	Plan []string `json:"plan,omitempty"`
}
