package appplan

import (
	"strings"

	"github.com/plinth-dev/plinth/pkg/api"
)

// Origins of a merged value, lowest layer first: the chart's own defaults, the
// application's values, the system overrides generated from the site, the
// operator's `app override set` values.
const (
	OriginChart       = "chart"
	OriginApplication = "application"
	OriginSystem      = "system"
	OriginUser        = "user"
)

// Layer is one set of values and where it comes from.
type Layer struct {
	Origin string
	Values map[string]any
}

// Merge deep-merges layers, lowest first, by Helm's rules (maps merge key by key; any
// other value replaces; a null in a higher layer deletes the key). It returns the merged
// values and the origin of every leaf, keyed by dotted path ("conf.ceph.enabled"; list
// values are leaves, and so is an empty map). Inputs are not modified.
//
// Without a chart layer (what goes to Helm), a null stays in the result as null:
// Helm then deletes the chart's own default of that key too, as `--set key=null`
// would. With the chart layer given (`app overrides show`), nothing is below it and
// the key is simply gone.
func Merge(layers ...Layer) (merged map[string]any, origins map[string]string) {
	merged, origins = map[string]any{}, map[string]string{}
	keepNulls := true
	for _, l := range layers {
		keepNulls = keepNulls && l.Origin != OriginChart
	}
	for _, l := range layers {
		mergeInto(merged, l.Values, "", l.Origin, origins, keepNulls)
	}
	return merged, origins
}

func mergeInto(dst, src map[string]any, prefix, origin string, origins map[string]string, keepNulls bool) {
	for k, v := range src {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		if v == nil && keepNulls {
			dropOrigins(origins, p)
			dst[k] = nil
			origins[p] = origin
			continue
		}
		if v == nil {
			if _, ok := dst[k]; ok {
				delete(dst, k)
				dropOrigins(origins, p)
			}
			continue
		}
		sm, isMap := v.(map[string]any)
		if !isMap {
			dropOrigins(origins, p)
			dst[k] = deepCopy(v)
			origins[p] = origin
			continue
		}
		dm, ok := dst[k].(map[string]any)
		if !ok {
			dropOrigins(origins, p)
			dm = map[string]any{}
			dst[k] = dm
		}
		if len(sm) == 0 {
			if len(dm) == 0 {
				origins[p] = origin
			}
			continue
		}
		delete(origins, p) // no longer an empty-map leaf
		mergeInto(dm, sm, p, origin, origins, keepNulls)
		if len(dm) == 0 {
			origins[p] = origin // every key deleted: an empty map is left
		}
	}
}

// dropOrigins forgets the origin of path and of everything under it.
func dropOrigins(origins map[string]string, path string) {
	delete(origins, path)
	for k := range origins {
		if strings.HasPrefix(k, path+".") {
			delete(origins, k)
		}
	}
}

// deepCopy copies maps and lists so the merged values share nothing with a layer.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		l := make([]any, len(v))
		for i, e := range v {
			l[i] = deepCopy(e)
		}
		return l
	}
	return v
}

// Layers are the override layers Plinth puts above a chart's own defaults, lowest
// first: the application's values for the chart, the system overrides generated
// from the site, and the operator's (user) overrides. Everything that merges a
// chart's values — the leader's apply, the upload's render check, `app overrides
// show` — takes them from here, so all three agree.
func Layers(f SiteFacts, app *api.Application, c api.Chart, user map[string]any) []Layer {
	return []Layer{
		{Origin: OriginApplication, Values: c.Values},
		{Origin: OriginSystem, Values: System(f, app, c)},
		{Origin: OriginUser, Values: user},
	}
}
