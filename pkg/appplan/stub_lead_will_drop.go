// Package appplan is a stub on branch app-cli so the server compiles: helper
// app-plan writes the real package and the lead drops this file at merge.
package appplan

import (
	"sort"

	"github.com/plinth-dev/plinth/pkg/api"
)

// Override origins, lowest first.
const (
	OriginChart       = "chart"
	OriginApplication = "application"
	OriginSystem      = "system"
	OriginUser        = "user"
)

// Layer is one override layer.
type Layer struct {
	Origin string
	Values map[string]any
}

// Merge deep-merges layers (later wins) and says which layer set each leaf.
func Merge(layers ...Layer) (merged map[string]any, origins map[string]string) {
	merged, origins = map[string]any{}, map[string]string{}
	for _, l := range layers {
		mergeInto(merged, l.Values, "", l.Origin, origins)
	}
	return merged, origins
}

func mergeInto(dst, src map[string]any, prefix, origin string, origins map[string]string) {
	keys := make([]string, 0, len(src))
	for k := range src {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := src[k]
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		if sm, ok := v.(map[string]any); ok {
			dm, ok := dst[k].(map[string]any)
			if !ok {
				dm = map[string]any{}
				dropUnder(origins, p)
			}
			dst[k] = dm
			mergeInto(dm, sm, p, origin, origins)
			continue
		}
		dropUnder(origins, p)
		dst[k] = v
		origins[p] = origin
	}
}

func dropUnder(origins map[string]string, p string) {
	for k := range origins {
		if k == p || len(k) > len(p) && k[:len(p)+1] == p+"." {
			delete(origins, k)
		}
	}
}

// SiteFacts is what the system overrides are generated from.
type SiteFacts struct {
	Site         *api.Site
	Hosts        []api.Host
	CephMonitors []string
	CephFSID     string
}

// System is the generated override layer (stub: none).
func System(f SiteFacts, app *api.Application, chart api.Chart) map[string]any { return nil }

// CheckSite checks the application against the site (stub: nothing).
func CheckSite(file string, app *api.Application, f SiteFacts) api.ErrorList { return nil }
