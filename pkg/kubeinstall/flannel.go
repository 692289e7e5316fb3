package kubeinstall

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"text/template"

	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// FlannelNamespace holds flannel's DaemonSet, ServiceAccount and ConfigMap.
const FlannelNamespace = "kube-flannel"

// FlannelManifest renders the flannel pod network: the namespace, flanneld's
// ServiceAccount and its rights (read nodes, patch their status), the ConfigMap with
// net-conf.json (the pod network over VXLAN), and the DaemonSet running the bundle's
// flanneld on every node. flanneld takes each node's podCIDR, sets up flannel.1 and
// writes /run/flannel/subnet.env and /etc/cni/net.d/10-flannel.conflist on the host
// (bridge + host-local, see deploy/bundle/flanneld). The image is imported from the
// site bundle, never pulled.
func FlannelManifest(in kubespec.FlannelInputs) ([]byte, error) {
	p, err := netip.ParsePrefix(in.Network)
	if err != nil || !p.Addr().Is4() || p.Masked() != p {
		return nil, fmt.Errorf("flannel: network %q must be an IPv4 network address in CIDR form (e.g. 10.244.0.0/16)", in.Network)
	}
	// kube-controller-manager hands out /24s (its default node-cidr-mask-size).
	if p.Bits() > 22 {
		return nil, fmt.Errorf("flannel: network %s is too small: kube-controller-manager gives each node a /24, so it must be /22 or larger", in.Network)
	}
	if in.Image == "" || strings.ContainsAny(in.Image, " \t\n\"'") {
		return nil, fmt.Errorf("flannel: image %q must be an image reference (e.g. registry.local/flannel:v0.28.10)", in.Image)
	}
	var b bytes.Buffer
	err = flannelTemplate.Execute(&b, struct {
		Namespace, Network, Image string
	}{FlannelNamespace, p.String(), in.Image})
	return b.Bytes(), err
}

var flannelTemplate = template.Must(template.New("flannel").Parse(`apiVersion: v1
kind: Namespace
metadata:
  name: {{.Namespace}}
  labels: {k8s-app: flannel, pod-security.kubernetes.io/enforce: privileged}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: flannel, namespace: {{.Namespace}}, labels: {k8s-app: flannel}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: flannel, labels: {k8s-app: flannel}}
rules:
- {apiGroups: [""], resources: [nodes], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [nodes/status], verbs: [patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: flannel, labels: {k8s-app: flannel}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: flannel}
subjects:
- {kind: ServiceAccount, name: flannel, namespace: {{.Namespace}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kube-flannel-cfg, namespace: {{.Namespace}}, labels: {k8s-app: flannel}}
data:
  net-conf.json: |
    {"Network": "{{.Network}}", "Backend": {"Type": "vxlan"}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-flannel-ds, namespace: {{.Namespace}}, labels: {k8s-app: flannel}}
spec:
  selector:
    matchLabels: {app: flannel}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
  template:
    metadata:
      labels: {app: flannel, k8s-app: flannel}
    spec:
      hostNetwork: true
      priorityClassName: system-node-critical
      serviceAccountName: flannel
      nodeSelector: {kubernetes.io/os: linux}
      # Every node, whatever its taints: control-plane ones, and not-ready until this
      # very pod has written the node's CNI config.
      tolerations:
      - {operator: Exists}
      containers:
      - name: flanneld
        image: {{.Image}}
        imagePullPolicy: Never
        command: [/usr/local/bin/flanneld, -iface=$(HOST_IP), -net-conf=/etc/kube-flannel/net-conf.json,
          -subnet-file=/run/flannel/subnet.env, -cni-conf=/etc/cni/net.d/10-flannel.conflist]
        env:
        - name: NODE_NAME
          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
        - name: HOST_IP
          valueFrom: {fieldRef: {fieldPath: status.hostIP}}
        resources:
          requests: {cpu: 50m, memory: 50Mi}
        securityContext:
          privileged: false
          capabilities: {add: [NET_ADMIN, NET_RAW]}
        volumeMounts:
        - {name: run, mountPath: /run/flannel}
        - {name: cni, mountPath: /etc/cni/net.d}
        - {name: config, mountPath: /etc/kube-flannel}
      volumes:
      - name: run
        hostPath: {path: /run/flannel, type: DirectoryOrCreate}
      - name: cni
        hostPath: {path: /etc/cni/net.d, type: DirectoryOrCreate}
      - name: config
        configMap: {name: kube-flannel-cfg}
`))
