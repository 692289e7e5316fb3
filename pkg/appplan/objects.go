package appplan

import (
	"slices"
	"strings"

	"github.com/plinth-dev/plinth/pkg/api"
)

// Kinds of generated objects.
const (
	KindSecret       = "Secret"
	KindConfigMap    = "ConfigMap"
	KindStorageClass = "StorageClass"
)

// Object is a Kubernetes object the leader creates before an application's charts.
type Object struct {
	Kind      string // "Secret", "ConfigMap", "StorageClass"
	Namespace string // "" for StorageClass
	Name      string
	// Data is a ConfigMap's data or a StorageClass's parameters; on a Secret, its
	// plain (non-secret) data keys, such as ceph-csi's userID.
	Data map[string]string
	// SecretData maps a Secret's data key to the name of the Plinth secret (the
	// replicated state's secret table, e.g. secretref.OutputName(stepID, cephspec.OutputKey)
	// or a generated password name) whose value goes there. Only Secrets have it.
	SecretData  map[string]string
	Provisioner string // StorageClass only
}

// Objects returns the generated objects for app, in a stable order (Secrets and
// ConfigMaps in each namespace its charts use, sorted, then cluster-scoped ones):
// the Ceph key Secrets and ceph-etc ConfigMap on a Ceph site, the passwords Secret
// when the application has passwords, and the RBD StorageClass with its ceph-csi
// Secret in StorageClassSecretNamespace. ceph-etc waits for the monitors to be
// known and the StorageClass for the fsid (both ceph.health outputs): a cephUsers
// or cephPools gate makes an application wait for them.
func Objects(f SiteFacts, app *api.Application) []Object {
	var namespaces []string
	for _, g := range app.Spec.Groups {
		for _, c := range g.Charts {
			if ns := c.Effective().Namespace; !slices.Contains(namespaces, ns) {
				namespaces = append(namespaces, ns)
			}
		}
	}
	slices.Sort(namespaces)
	c := cephFacts(f)
	var out []Object
	for _, ns := range namespaces {
		if c.enabled {
			out = append(out, cephObjects(f, c, ns)...)
		}
		if len(app.Spec.Passwords) > 0 {
			data := map[string]string{}
			for _, n := range app.Spec.Passwords {
				data[n] = PasswordSecret(app.Metadata.Name, n)
			}
			out = append(out, Object{Kind: KindSecret, Namespace: ns, Name: PasswordsSecretName(app.Metadata.Name), SecretData: data})
		}
	}
	if c.enabled && f.CephFSID != "" && slices.Contains(c.users, CephKubeUser) && slices.Contains(c.pools, CephKubePool) {
		ns := StorageClassSecretNamespace
		if !slices.Contains(namespaces, ns) {
			out = append(out, csiSecret(f.Site, ns))
		}
		out = append(out, Object{
			Kind: KindStorageClass, Name: StorageClassRBD, Provisioner: ProvisionerRBD,
			Data: map[string]string{
				"clusterID":                 f.CephFSID,
				"pool":                      CephKubePool,
				"imageFeatures":             "layering",
				"csi.storage.k8s.io/fstype": "ext4",
				"csi.storage.k8s.io/provisioner-secret-name":            SecretCephClientKey,
				"csi.storage.k8s.io/provisioner-secret-namespace":       ns,
				"csi.storage.k8s.io/controller-expand-secret-name":      SecretCephClientKey,
				"csi.storage.k8s.io/controller-expand-secret-namespace": ns,
				"csi.storage.k8s.io/node-stage-secret-name":             SecretCephClientKey,
				"csi.storage.k8s.io/node-stage-secret-namespace":        ns,
			},
		})
	}
	return out
}

// cephObjects are one namespace's Ceph key Secrets and ceph-etc ConfigMap.
func cephObjects(f SiteFacts, c cephSite, ns string) []Object {
	var out []Object
	if slices.Contains(c.users, CephKubeUser) {
		out = append(out, csiSecret(f.Site, ns))
	}
	for _, s := range ServiceKeys {
		if slices.Contains(c.users, s.User) {
			out = append(out, Object{Kind: KindSecret, Namespace: ns, Name: s.Secret,
				SecretData: map[string]string{KeyData: CephKeySecret(f.Site, s.User)}})
		}
	}
	if len(c.monitors) > 0 {
		out = append(out, Object{Kind: KindConfigMap, Namespace: ns, Name: ConfigMapCephEtc,
			Data: map[string]string{CephConfKey: CephConf(f.CephFSID, c.monitors)}})
	}
	return out
}

// csiSecret is pvc-ceph-client-key: the kube-rbd key under OpenStack-Helm's data key
// and under ceph-csi's, with ceph-csi's plain user id.
func csiSecret(site *api.Site, ns string) Object {
	key := CephKeySecret(site, CephKubeUser)
	return Object{Kind: KindSecret, Namespace: ns, Name: SecretCephClientKey,
		Data:       map[string]string{CSIUserID: CephKubeUser},
		SecretData: map[string]string{KeyData: key, CSIUserKey: key}}
}

// CephConf is the ceph.conf of the ceph-etc ConfigMap: the cluster and its monitors,
// no key (clients read theirs from the key Secrets).
func CephConf(fsid string, monitors []string) string {
	var b strings.Builder
	b.WriteString("[global]\n")
	if fsid != "" {
		b.WriteString("fsid = " + fsid + "\n")
	}
	b.WriteString("mon_host = " + strings.Join(monitors, ",") + "\n")
	return b.String()
}
