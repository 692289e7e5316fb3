package plan

// renderContainerd renders containerd.config and images.import for every host that
// runs Kubernetes. It renders nothing until that work lands.
func renderContainerd(in renderInput) ([]Step, error) {
	return nil, nil
}
