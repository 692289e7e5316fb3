package schema

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/plinth-dev/plinth/pkg/api"
)

// probeDefaults runs pkg/api's own defaulting (Default, the Effective methods,
// EffectiveContainerd, CephPools) on empty documents and returns what it set, by dotted path
// (site.spec.policy.drift), so no default is written down a second time here.
//
// An empty document has every optional object present and every list holding one
// empty element, so defaulting reaches every field it can. Some defaults depend on
// other fields (a bond's lacpRate on its mode, a pool's size on the number of OSD
// hosts); several probes vary those, and a value two probes disagree on is left out:
// the field's description states the rule.
func probeDefaults() (map[string]any, error) {
	r := recorder{set: map[string]any{}, conflict: map[string]bool{}}

	// The site twice: the second with OSD hosts, which size the default pool
	// replication, an image repository, which the default images are under, and
	// OVS interfaces with a PCI address, which makes their type dpdk.
	probes := []struct {
		hosts []api.Host
		repo  string
		pci   string
	}{{nil, "", ""}, {storageHosts(3), "registry.local:5000/k8s", "0000:03:00.0"}}
	for _, pr := range probes {
		hosts := pr.hosts
		var before, after api.SiteSpec
		fill(reflect.ValueOf(&before).Elem())
		fill(reflect.ValueOf(&after).Elem())
		for _, s := range []*api.SiteSpec{&before, &after} {
			s.Kubernetes.ImageRepository = pr.repo
			s.OVS.Bridges[0].Ports[0].PCI = pr.pci
			s.OVS.Bridges[0].Ports[0].Bond.Members[0].PCI = pr.pci
		}
		after.Default()
		k := after.Kubernetes.Effective()
		c := after.Kubernetes.EffectiveContainerd()
		k.Containerd = &c
		after.Kubernetes = &k
		o := after.OVS.Effective()
		after.OVS = &o
		ce := after.Ceph.Effective()
		after.Ceph = &ce
		// Only the declared pool, not the default set, so index 0 is the probe's pool.
		ceph := after
		cc := *after.Ceph
		cc.Defaults = api.CephDefaultsNone
		ceph.Ceph = &cc
		pools := api.CephPools(&ceph, hosts)
		if len(pools) != 1 {
			return nil, fmt.Errorf("schema: probe defaults: CephPools returned %d pools for one declared", len(pools))
		}
		after.Ceph.Pools = pools
		r.diff("site.spec", reflect.ValueOf(before), reflect.ValueOf(after))
	}

	// The host, and an interface of every type (each type defaults its own options).
	var before, after api.HostSpec
	fill(reflect.ValueOf(&before).Elem())
	fill(reflect.ValueOf(&after).Elem())
	after.Default()
	r.diff("host.spec", reflect.ValueOf(before), reflect.ValueOf(after))
	for _, t := range api.InterfaceTypes {
		var before, after api.Interface
		fill(reflect.ValueOf(&before).Elem())
		fill(reflect.ValueOf(&after).Elem())
		before.Type, after.Type = t, t
		after.Default()
		r.diff("host.spec.interfaces", reflect.ValueOf(before), reflect.ValueOf(after))
	}

	// The application: defaulting fills every chart and nodesLabelled gate.
	var abefore, aafter api.ApplicationSpec
	fill(reflect.ValueOf(&abefore).Elem())
	fill(reflect.ValueOf(&aafter).Elem())
	aafter.Default()
	r.diff("application.spec", reflect.ValueOf(abefore), reflect.ValueOf(aafter))

	for p := range r.conflict {
		delete(r.set, p)
	}
	return r.set, nil
}

func storageHosts(n int) []api.Host {
	hosts := make([]api.Host, n)
	for i := range hosts {
		hosts[i].Metadata.Name = fmt.Sprintf("storage-%d", i)
		hosts[i].Spec.Roles = []string{api.RoleStorage}
	}
	return hosts
}

// fill makes v an "empty document": pointers allocated, lists of one element, all
// recursively; scalars and maps stay zero.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	}
}

// recorder collects the values defaulting set, by path.
type recorder struct {
	set      map[string]any
	conflict map[string]bool
}

// diff records every scalar that is zero in before and set in after.
func (r *recorder) diff(path string, before, after reflect.Value) {
	switch after.Kind() {
	case reflect.Pointer:
		if before.IsNil() || after.IsNil() {
			return
		}
		r.diff(path, before.Elem(), after.Elem())
	case reflect.Struct:
		t := after.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			p := path + "." + name
			if f.Anonymous && name == "" {
				p = path // flattened, as encoding/json does
			}
			r.diff(p, before.Field(i), after.Field(i))
		}
	case reflect.Slice:
		if before.Len() > 0 && after.Len() > 0 {
			r.diff(path, before.Index(0), after.Index(0))
		}
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64:
		if !before.IsZero() || after.IsZero() {
			return
		}
		v := after.Interface()
		if old, ok := r.set[path]; ok && old != v {
			r.conflict[path] = true
		}
		r.set[path] = v
	}
}
