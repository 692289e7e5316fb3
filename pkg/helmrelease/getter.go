package helmrelease

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// getter gives the Helm SDK its Kubernetes clients for one namespace from an
// in-memory kubeconfig, sharing one cached discovery client and REST mapper
// across every operation of a Driver (discovery is most of a cold call's cost;
// Helm itself invalidates both after installing a chart's CRDs).
type getter struct {
	raw       clientcmdapi.Config
	config    *rest.Config
	namespace string
	disc      discovery.CachedDiscoveryInterface
	mapper    meta.RESTMapper
}

func (g *getter) forNamespace(ns string) *getter {
	c := *g
	c.namespace = ns
	return &c
}

func (g *getter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.config), nil }

func (g *getter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) { return g.disc, nil }

func (g *getter) ToRESTMapper() (meta.RESTMapper, error) { return g.mapper, nil }

func (g *getter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(g.raw, &clientcmd.ConfigOverrides{Context: clientcmdapi.Context{Namespace: g.namespace}})
}
