package appplan

import (
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/secretref"
)

// The names of what Plinth generates for charts: OpenStack-Helm's where it has one,
// so its charts find them without overrides. This is their one home.
const (
	// SecretCephClientKey holds the cephx key of CephKubeUser (data key KeyData), the
	// one Kubernetes' RBD provisioner and the charts' ceph clients use.
	SecretCephClientKey = "pvc-ceph-client-key"
	// ConfigMapCephEtc holds a ceph.conf (data key CephConfKey) naming the cluster's
	// fsid and monitors.
	ConfigMapCephEtc = "ceph-etc"
	CephConfKey      = "ceph.conf"
	// StorageClassRBD is the RBD StorageClass, provisioned by ceph-csi.
	StorageClassRBD = "general"
	ProvisionerRBD  = "rbd.csi.ceph.com"
	// StorageClassSecretNamespace is where the StorageClass's ceph-csi secret lives:
	// a StorageClass is cluster-wide, so its secret cannot follow one application.
	StorageClassSecretNamespace = "kube-system"
	// CephKubeUser and CephKubePool are the provisioner's cephx user and pool (the
	// site's "openstack" Ceph defaults declare both).
	CephKubeUser = "kube-rbd"
	CephKubePool = "kube-rbd"
	// KeyData is the data key of every keyring Secret (OpenStack-Helm's).
	KeyData = "key"
	// CSIUserID and CSIUserKey are the data keys ceph-csi reads from the
	// StorageClass's secret: the cephx id (plain) and its key.
	CSIUserID  = "userID"
	CSIUserKey = "userKey"
	// ValuesKey is the top-level key all generated values live under (besides the
	// few OpenStack-Helm keys System documents).
	ValuesKey = "plinth"
)

// ServiceKey is an OpenStack service's cephx key Secret.
type ServiceKey struct {
	User   string // the site's cephx user
	Secret string // the Secret holding its key, data key KeyData
}

// ServiceKeys are the per-service key Secrets, generated when the site has the user.
var ServiceKeys = []ServiceKey{
	{User: "glance", Secret: "images-rbd-keyring"},
	{User: "cinder", Secret: "cinder-volume-rbd-keyring"},
	{User: "nova", Secret: "nova-rbd-keyring"},
}

// servicePools are the OpenStack-Helm conf.ceph.pools roles, each filled when the
// site has a pool of that name.
var servicePools = []string{"images", "volumes", "vms", "backups"}

// nodeSelectors are the plinth.nodeSelectors entries: OpenStack-Helm's
// labels.<name>.node_selector_key/value for each label Plinth puts on nodes.
var nodeSelectors = []struct{ name, label string }{
	{"control_plane", kubespec.LabelControlPlane},
	{"compute", kubespec.LabelCompute},
	{"openvswitch", kubespec.LabelOpenvswitch},
	{"sriov", kubespec.LabelSRIOV},
}

// SiteFacts is what system overrides are generated from; the caller fills it from the
// replicated state (opened, non-secret outputs only).
type SiteFacts struct {
	Site         *api.Site // effective (defaulted) site
	Hosts        []api.Host
	CephMonitors []string // from ceph.health's monitors output, "" if not yet known
	CephFSID     string
}

// PasswordsSecretName is the Secret that holds app's generated passwords, one data
// key per password name, in every namespace the app's charts use.
func PasswordsSecretName(app string) string { return app + "-passwords" }

// PasswordSecret is the name of the Plinth secret holding password name of app:
// a secretref generated reference name (kind secretref.GenPassword) so the leader's
// existing generator creates it.
func PasswordSecret(app, name string) string {
	return secretref.GeneratedName(secretref.GenPassword, "app/"+app+"/"+name)
}

// CephKeySecret is the Plinth secret holding the cephx key of the site's user: the
// sealed output of its ceph.user step.
func CephKeySecret(site *api.Site, user string) string {
	return secretref.OutputName(plan.StepID(api.CephHost(&site.Spec), cephspec.KindUser, user), cephspec.OutputKey)
}

// System returns the system overrides for one chart of app: plain values only (never a
// key or password: they are referenced by Secret name).
//
// Everything is under "plinth": site, application, release, namespace; ceph
// (enabled, fsid, monitors, pools, secrets, configMap, storageClass); ovs (enabled,
// dpdk, datapathType, bridges, bridgeMappings); nodeSelectors (OpenStack-Helm's
// labels.*: node_selector_key/value); endpoints (controlPlaneVIP, apiServer);
// passwords (secretName, keys). Besides it, the OpenStack-Helm keys charts commonly
// read: conf.ceph.enabled, conf.ceph.monitors, conf.ceph.pools.{images,volumes,vms,
// backups} (those the site has), conf.ovs_dpdk.enabled and
// conf.plugins.openvswitch_agent.ovs.{datapath_type,bridge_mappings} (OVS sites).
func System(f SiteFacts, app *api.Application, chart api.Chart) map[string]any {
	chart = chart.Effective()
	p := map[string]any{
		"application": app.Metadata.Name,
		"release":     chart.Release,
		"namespace":   chart.Namespace,
	}
	conf := map[string]any{}
	out := map[string]any{ValuesKey: p, "conf": conf}
	if f.Site != nil {
		p["site"] = f.Site.Metadata.Name
	}

	ceph := map[string]any{"enabled": false}
	p["ceph"] = ceph
	confCeph := map[string]any{"enabled": false}
	conf["ceph"] = confCeph
	if c := cephFacts(f); c.enabled {
		ceph["enabled"], confCeph["enabled"] = true, true
		ceph["fsid"] = f.CephFSID
		mons := anyList(c.monitors)
		ceph["monitors"], confCeph["monitors"] = mons, deepCopy(mons)
		ceph["pools"] = anyList(c.pools)
		rolePools := map[string]any{}
		for _, r := range servicePools {
			if slices.Contains(c.pools, r) {
				rolePools[r] = r
			}
		}
		if len(rolePools) > 0 {
			confCeph["pools"] = rolePools
		}
		secrets := map[string]any{}
		if slices.Contains(c.users, CephKubeUser) {
			secrets["client"] = SecretCephClientKey
			if slices.Contains(c.pools, CephKubePool) {
				ceph["storageClass"] = StorageClassRBD
			}
		}
		for _, s := range ServiceKeys {
			if slices.Contains(c.users, s.User) {
				secrets[s.User] = s.Secret
			}
		}
		ceph["secrets"] = secrets
		ceph["configMap"] = ConfigMapCephEtc
	}

	if f.Site != nil && f.Site.Spec.OVS != nil {
		dpdk := len(plan.DPDKHosts(f.Site, f.Hosts)) > 0
		datapath := "system"
		if dpdk {
			datapath = "netdev"
		}
		var names []any
		for _, b := range f.Site.Spec.OVS.Bridges {
			names = append(names, b.Name)
		}
		mappings := BridgeMappings(f.Site.Spec.OVS)
		p["ovs"] = map[string]any{
			"enabled": true, "dpdk": dpdk, "datapathType": datapath,
			"bridges": anyList(names), "bridgeMappings": mappings,
		}
		conf["ovs_dpdk"] = map[string]any{"enabled": dpdk}
		conf["plugins"] = map[string]any{"openvswitch_agent": map[string]any{"ovs": map[string]any{
			"datapath_type": datapath, "bridge_mappings": mappings,
		}}}
	} else {
		p["ovs"] = map[string]any{"enabled": false}
	}

	sel := map[string]any{}
	for _, n := range nodeSelectors {
		sel[n.name] = map[string]any{"node_selector_key": n.label, "node_selector_value": kubespec.LabelEnabled}
	}
	p["nodeSelectors"] = sel

	if ep := endpoints(f); len(ep) > 0 {
		p["endpoints"] = ep
	}

	pw := map[string]any{}
	if names := app.Spec.Passwords; len(names) > 0 {
		pw["secretName"] = PasswordsSecretName(app.Metadata.Name)
		pw["keys"] = anyList(names)
	}
	p["passwords"] = pw
	return out
}

// BridgeMappings is Neutron's bridge_mappings for the site's OVS bridges: each
// bridge's physical network is its name without a leading "br-" ("br-phy" carries
// "phy"), in the order the site lists them: "phy:br-phy,ex:br-ex".
func BridgeMappings(o *api.OVSSpec) string {
	var m []string
	for _, b := range o.Bridges {
		m = append(m, strings.TrimPrefix(b.Name, "br-")+":"+b.Name)
	}
	return strings.Join(m, ",")
}

// endpoints are the control-plane VIP and the API server's URL (on the VIP, else
// the first controller's management address).
func endpoints(f SiteFacts) map[string]any {
	ep := map[string]any{}
	if f.Site == nil || f.Site.Spec.Kubernetes == nil {
		return ep
	}
	k := f.Site.Spec.Kubernetes.Effective()
	addr := k.ControlPlaneVIP
	if addr != "" {
		ep["controlPlaneVIP"] = addr
	} else if len(f.Site.Spec.Controllers) > 0 {
		for _, h := range f.Hosts {
			if h.Metadata.Name == f.Site.Spec.Controllers[0] {
				addr = h.Spec.ManagementAddress
			}
		}
	}
	if addr != "" {
		ep["apiServer"] = "https://" + net.JoinHostPort(addr, strconv.Itoa(k.APIServerPort))
	}
	return ep
}

// cephSite is what the site's Ceph section gives the charts.
type cephSite struct {
	enabled  bool
	monitors []string
	pools    []string // effective, not being deleted
	users    []string // likewise
}

func cephFacts(f SiteFacts) cephSite {
	if f.Site == nil || f.Site.Spec.Ceph == nil {
		return cephSite{}
	}
	spec := &f.Site.Spec
	c := cephSite{enabled: true}
	for _, m := range f.CephMonitors {
		if m != "" {
			c.monitors = append(c.monitors, m)
		}
	}
	if len(c.monitors) == 0 {
		c.monitors = slices.Clone(spec.Ceph.Monitors)
	}
	for _, p := range api.CephPools(spec, f.Hosts) {
		if !p.Delete {
			c.pools = append(c.pools, p.Name)
		}
	}
	for _, u := range api.CephUsers(spec) {
		if !u.Delete {
			c.users = append(c.users, u.Name)
		}
	}
	return c
}

func anyList[T any](l []T) []any {
	out := make([]any, len(l))
	for i, v := range l {
		out[i] = v
	}
	return out
}
