package state

import (
	"fmt"
	"strings"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// documentTable is how the store keeps one document kind of api.DocumentKinds: what
// `get` lists, what `describe` shows and the command `delete` proposes. The server's
// routes and the CLI come from the same rows (TestDocumentTables keeps one per kind).
type documentTable struct {
	// list returns what `get` shows and the index it last changed at.
	list func(v View) (any, uint64)
	// describe returns one document with what belongs to it; nil unless the kind's
	// api row says Describe.
	describe func(v View, name string) (any, uint64, bool)
	// remove is the command that deletes one document; nil unless the row says Delete.
	remove func(name string) (typ string, body any)
}

var documents = map[string]documentTable{
	api.KindSite: {
		list: func(v View) (any, uint64) {
			site, ok := v.Site()
			if !ok {
				return nil, v.Index()
			}
			return site, site.ModifyIndex
		},
		describe: func(v View, name string) (any, uint64, bool) {
			site, ok := v.Site()
			if !ok || site.Site.Metadata.Name != name {
				return nil, 0, false
			}
			d := SiteDetail{Site: site, Certificates: v.coordinatorCerts()}
			for _, e := range v.Events(0) {
				if strings.HasPrefix(e.Object, "site/") || strings.HasPrefix(e.Object, "coordinator/") {
					d.Events = append(d.Events, e)
				}
			}
			return d, site.ModifyIndex, true
		},
	},
	api.KindHost: {
		list: func(v View) (any, uint64) {
			hs := v.Hosts()
			var idx uint64
			for _, h := range hs {
				idx = max(idx, h.ModifyIndex)
			}
			return hs, idx
		},
		describe: func(v View, name string) (any, uint64, bool) {
			h, ok := v.Host(name)
			if !ok {
				return nil, 0, false
			}
			d := HostDetail{Host: h, Steps: v.Steps(name), Certificates: v.Certificates(name)}
			idx := h.ModifyIndex
			for _, st := range d.Steps {
				idx = max(idx, st.ModifyIndex)
			}
			for _, e := range v.Events(0) {
				if e.Object == "host/"+name || strings.HasPrefix(e.Object, "step/"+name+"/") {
					d.Events = append(d.Events, e)
				}
			}
			return d, idx, true
		},
		remove: func(name string) (string, any) { return CmdDeleteHost, DeleteHost{Name: name} },
	},
	api.KindApplication: {
		list: func(v View) (any, uint64) {
			apps := v.Apps()
			var idx uint64
			for _, r := range apps {
				idx = max(idx, r.ModifyIndex)
			}
			return apps, idx
		},
		describe: func(v View, name string) (any, uint64, bool) {
			r, ok := v.App(name)
			if !ok {
				return nil, 0, false
			}
			d := AppDetail{App: r}
			for _, e := range v.Events(0) {
				if e.Object == appObject(name) || strings.HasPrefix(e.Object, appObject(name)+"/") {
					d.Events = append(d.Events, e)
				}
			}
			return d, r.ModifyIndex, true
		},
		remove: func(name string) (string, any) {
			return CmdAppRequest, AppRequest{Name: name, Action: AppActionDelete}
		},
	},
}

// HostDetail is a host with its steps and recent events, for `describe host`.
type HostDetail struct {
	Host   HostRecord    `json:"host"`
	Steps  []plan.Record `json:"steps"`
	Events []Event       `json:"events"`
	// Certificates are every certificate that concerns the host and when each
	// expires: its agent's, its coordinator's, kubeadm's on a controller, the site CA.
	Certificates []api.CertValidity `json:"certificates,omitempty"`
}

// SiteDetail is the site with the certificates every host depends on (the site CA,
// each coordinator's) and the site's and coordinators' events, for `describe site`.
type SiteDetail struct {
	Site         SiteRecord         `json:"site"`
	Certificates []api.CertValidity `json:"certificates,omitempty"`
	Events       []Event            `json:"events"`
}

func documentTableOf(kind string) (documentTable, error) {
	t, ok := documents[kind]
	if !ok {
		return documentTable{}, fmt.Errorf("state: no table for document kind %q", kind)
	}
	return t, nil
}

// List returns what `get` shows for a document kind (api.DocumentKind.Kind) and the
// index it last changed at, for blocking queries.
func (v View) List(kind string) (any, uint64, error) {
	t, err := documentTableOf(kind)
	if err != nil {
		return nil, 0, err
	}
	out, idx := t.list(v)
	return out, idx, nil
}

// Describe returns one document of kind with what belongs to it (a host's steps and
// events), and the index it last changed at; ErrNotFound when there is none.
func (v View) Describe(kind, name string) (any, uint64, error) {
	t, err := documentTableOf(kind)
	if err != nil {
		return nil, 0, err
	}
	if t.describe == nil {
		return nil, 0, fmt.Errorf("state: %s documents cannot be described", kind)
	}
	out, idx, ok := t.describe(v, name)
	if !ok {
		return nil, 0, fmt.Errorf("%s %q: %w", strings.ToLower(kind), name, ErrNotFound)
	}
	return out, idx, nil
}

// DeleteCommand returns the command that deletes the document kind/name.
func DeleteCommand(kind, name string) (typ string, body any, err error) {
	t, err := documentTableOf(kind)
	if err != nil {
		return "", nil, err
	}
	if t.remove == nil {
		return "", nil, fmt.Errorf("state: %s documents cannot be deleted", kind)
	}
	typ, body = t.remove(name)
	return typ, body, nil
}
