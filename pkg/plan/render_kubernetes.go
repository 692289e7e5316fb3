package plan

// renderKubernetes renders the steps for containerd, images, the control-plane VIP, kubeadm init/join and node labels. It renders nothing until that work lands.
func renderKubernetes(in renderInput) ([]Step, error) {
	return nil, nil
}
