// Package kubeinstall bootstraps Kubernetes on Plinth hosts: it turns the kube step
// inputs (package kubespec) into kubeadm v1beta4, kubelet and kube-proxy configuration,
// kube-vip and etcd files, and runs them through drivers — kube.vip, kube.etcd,
// kube.init, kube.join-control-plane, kube.join, kube.cni and kube.labels.
//
// Why its own types: k8s.io/kubernetes (which holds kubeadm's API) must never enter
// Plinth's go.mod, so kubeadm_types.go mirrors the v1beta4 fields Plinth writes, and the
// tests prove the result with the real kubeadm (`kubeadm config validate`, dry runs).
//
// It owns what Plinth changes on a host for Kubernetes and nothing else: a retry cleans
// up only what a failed init or join of Plinth's left behind. It must never decide
// what a host should run — the planner does — and never log a secret input.
package kubeinstall
