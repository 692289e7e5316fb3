//go:build tools

// Package tools pins modules that driver work in progress depends on, so parallel
// changes do not race on go.mod. Remove an import once real code uses the module.
package tools

import (
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/kube-proxy/config/v1alpha1"
	_ "k8s.io/kubelet/config/v1beta1"
)
