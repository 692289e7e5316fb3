package api

// KubernetesSpec is filled in by the Kubernetes bootstrap work; only the basics here.
type KubernetesSpec struct {
	Version         string `json:"version,omitempty"`
	ControlPlaneVIP string `json:"controlPlaneVIP,omitempty"`
	PodSubnet       string `json:"podSubnet,omitempty"`
	ServiceSubnet   string `json:"serviceSubnet,omitempty"`
	ImageRepository string `json:"imageRepository,omitempty"`
}
