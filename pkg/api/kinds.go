package api

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// DocumentKind is one kind of manifest document and everything that differs between
// kinds. Decoding, the state's tables (pkg/state), the API's get/describe/delete
// routes (pkg/server, paths from wire.DocumentPath), the CLI and the JSON schema
// (pkg/api/schema) read this table instead of switching on the kind, so a new kind
// (Applications next) is a row here plus its type, storage and printing
// (docs/development.md).
type DocumentKind struct {
	// Kind is the document's kind field: Site.
	Kind string
	// Name is the lowercase singular the CLI and explain paths use: site.
	Name string
	// Resource is the API collection and what `get` lists: site, hosts.
	Resource string
	// Singleton says a site holds at most one (the Site); other kinds are keyed by
	// metadata.name.
	Singleton bool
	// Describe and Delete say whether `describe NAME ID` and `delete NAME ID` exist.
	Describe, Delete bool
	// Type is the document's Go type.
	Type reflect.Type
	// Short says what the document declares.
	Short string

	// start returns the path the document's fields are reported under and the value
	// to decode it into, or ok=false (having reported why) to skip it.
	start func(d *decoder, doc int, obj map[string]any) (root string, target any, ok bool)
	// keep adds the decoded document to the manifest.
	keep func(m *Manifest, doc int, target any)
}

var documentKinds = []DocumentKind{
	{
		Kind: KindSite, Name: "site", Resource: "site", Singleton: true, Describe: true,
		Type:  reflect.TypeFor[Site](),
		Short: "the whole cloud: controllers, networks, Kubernetes, Ceph, OVS",
		start: func(d *decoder, doc int, obj map[string]any) (string, any, bool) {
			if d.m.Site != nil {
				d.add(doc, "kind", fmt.Sprintf("a manifest holds at most one Site; another is in document %d", d.m.Site.docIndex))
				return "", nil, false
			}
			if spec, ok := obj["spec"].(map[string]any); ok {
				if _, ok := spec["charts"]; ok {
					// Say where it went rather than report a bare unknown field.
					d.add(doc, "site.spec.charts", "moved to the Application kind (`plinth-coordinator app upload -f FILE`): "+
						"write the chart groups as an Application document (docs/applications.md) and delete spec.charts from the Site")
					delete(spec, "charts")
				}
			}
			return "site", &Site{}, true
		},
		keep: func(m *Manifest, doc int, target any) {
			t := target.(*Site)
			t.docIndex = doc
			m.Site = t
		},
	},
	{
		Kind: KindHost, Name: "host", Resource: "hosts", Describe: true, Delete: true,
		Type:  reflect.TypeFor[Host](),
		Short: "one machine: its roles, interfaces and per-host settings",
		start: func(d *decoder, _ int, obj map[string]any) (string, any, bool) {
			name, _ := lookup(obj, "metadata", "name").(string)
			root := index("hosts", key(name, d.hosts))
			d.hosts++
			return root, &Host{}, true
		},
		keep: func(m *Manifest, doc int, target any) {
			t := target.(*Host)
			t.docIndex = doc
			m.Hosts = append(m.Hosts, *t)
		},
	},
	{
		Kind: KindApplication, Name: "application", Resource: "applications", Describe: true, Delete: true,
		Type:  reflect.TypeFor[Application](),
		Short: "Helm charts installed in ordered groups on the site's cluster (app upload, app apply)",
		start: func(d *decoder, _ int, obj map[string]any) (string, any, bool) {
			name, _ := lookup(obj, "metadata", "name").(string)
			root := index("applications", key(name, d.apps))
			d.apps++
			return root, &Application{}, true
		},
		keep: func(m *Manifest, doc int, target any) {
			t := target.(*Application)
			t.docIndex = doc
			m.Applications = append(m.Applications, *t)
		},
	},
}

// DocumentKinds returns the table, in the order documents are listed and explained.
func DocumentKinds() []DocumentKind { return slices.Clone(documentKinds) }

// LookupDocumentKind returns the row of the document kind kind (Site, Host).
func LookupDocumentKind(kind string) (DocumentKind, bool) {
	i := slices.IndexFunc(documentKinds, func(k DocumentKind) bool { return k.Kind == kind })
	if i < 0 {
		return DocumentKind{}, false
	}
	return documentKinds[i], true
}

// DocumentKindNamed returns the row the CLI's word for a kind names: its name,
// singular or plural (host, hosts, site, sites).
func DocumentKindNamed(word string) (DocumentKind, bool) {
	i := slices.IndexFunc(documentKinds, func(k DocumentKind) bool {
		return word == k.Name || word == k.Name+"s" || word == k.Resource
	})
	if i < 0 {
		return DocumentKind{}, false
	}
	return documentKinds[i], true
}

// kindList joins the document kinds for a message: "Site and Host", "Site or Host".
func kindList(conj string) string {
	names := make([]string, len(documentKinds))
	for i, k := range documentKinds {
		names[i] = k.Kind
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}
