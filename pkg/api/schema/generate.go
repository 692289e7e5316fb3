package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/plinth-dev/plinth/pkg/api"
)

// ignored are the fields the decoder drops from the input because the coordinator owns
// them; the schema accepts any value there, as the decoder does.
var ignored = map[string]string{
	"status":              "Owned by the coordinator: the observed state and conditions. Ignored on input.",
	"metadata.generation": "Owned by the coordinator: bumped on every spec change. Ignored on input.",
}

// enum ties a manifest field, by its Go struct type and JSON name, to pkg/api's list
// of its valid values. For a list the values apply to its items, for a map to its keys.
type enum struct {
	typ    reflect.Type
	field  string
	values []string
}

func enumOf[T any](field string, values []string) enum {
	return enum{reflect.TypeFor[T](), field, values}
}

var enums = []enum{
	enumOf[api.Network]("role", api.NetworkRoles),
	enumOf[api.Policy]("drift", api.DriftPolicies),
	enumOf[api.HostSpec]("roles", api.HostRoles),
	enumOf[api.Interface]("type", api.InterfaceTypes),
	enumOf[api.Interface]("state", api.InterfaceStates),
	enumOf[api.BondOptions]("mode", api.BondModes),
	enumOf[api.BondOptions]("lacpRate", api.BondLACPRates),
	enumOf[api.BondOptions]("hashPolicy", api.BondHashPolicies),
	enumOf[api.MacvlanOptions]("mode", api.MacvlanModes),
	enumOf[api.KubernetesSpec]("vipProvider", api.VIPProviders),
	enumOf[api.KubernetesSpec]("proxyMode", api.ProxyModes),
	enumOf[api.CNISpec]("plugin", api.CNIPlugins),
	enumOf[api.ContainerdSpec]("cgroupDriver", api.CgroupDrivers),
	enumOf[api.ContainerdSpec]("snapshotter", api.Snapshotters),
	enumOf[api.CephSpec]("defaults", api.CephDefaultSets),
	enumOf[api.CephPool]("failureDomain", api.CephFailureDomains),
	enumOf[api.CephUser]("caps", api.CephCapKeys),
	enumOf[api.OVSBridge]("datapath", api.OVSDatapaths),
	enumOf[api.OVSInterface]("type", api.OVSPortTypes),
	enumOf[api.OVSBond]("mode", api.OVSBondModes),
	enumOf[api.OVSBond]("lacp", api.OVSLACPModes),
	enumOf[api.OVSBond]("lacpTime", api.OVSLACPTimes),
	enumOf[api.ChartWait]("for", api.WaitFors),
	enumOf[api.Chart]("remediation", api.Remediations),
}

// Generate builds the schema files from pkg/api's types and the doc comments of its
// sources in apiDir. It returns file name -> content (indented JSON, ending in a newline).
func Generate(apiDir string) (map[string][]byte, error) {
	comments, err := readComments(apiDir)
	if err != nil {
		return nil, err
	}
	defs, err := probeDefaults()
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	used := map[int]bool{}
	for _, k := range kinds() {
		g := generator{comments: comments, defaults: defs, used: map[int]bool{}}
		t := k.typ
		s := g.object(k.root, t)
		s.Description = g.comments[t.Name()].doc
		s.Schema = Draft
		s.Title = k.kind
		s.Properties["apiVersion"] = &Schema{Type: "string", Const: api.APIVersion, Description: "The manifest version this build understands."}
		s.Properties["kind"] = &Schema{Type: "string", Const: k.kind, Description: "The document kind."}
		if g.err != nil {
			return nil, g.err
		}
		b, err := encode(k.file, s)
		if err != nil {
			return nil, err
		}
		out[k.file] = b
		for i := range g.used {
			used[i] = true
		}
	}
	// No $id anywhere: editors resolve these relative references next to the file.
	m := &Schema{
		Schema:      Draft,
		Title:       "Plinth manifest document",
		Description: "One document of a site manifest: a Site, a Host or an Application, by its kind.",
		Type:        "object",
		Required:    []string{"kind"},
		Properties:  map[string]*Schema{"kind": {Type: "string", Enum: []string{}}},
	}
	for _, k := range kinds() {
		m.Properties["kind"].Enum = append(m.Properties["kind"].Enum, k.kind)
		m.AllOf = append(m.AllOf, &Schema{
			If:   &Schema{Properties: map[string]*Schema{"kind": {Const: k.kind}}},
			Then: &Schema{Ref: k.file},
		})
	}
	if out["manifest.json"], err = encode("manifest.json", m); err != nil {
		return nil, err
	}
	for i, e := range enums {
		if !used[i] {
			return nil, fmt.Errorf("schema: enum for %s.%s matches no field", e.typ.Name(), e.field)
		}
	}
	return out, nil
}

type generator struct {
	comments map[string]typeDocs
	defaults map[string]any
	used     map[int]bool // enums applied
	err      error
}

// object is the schema of struct type t at path (site.spec).
func (g *generator) object(path string, t reflect.Type) *Schema {
	s := &Schema{Type: "object", Properties: map[string]*Schema{}, AdditionalProperties: &Additional{}}
	g.fields(path, t, s)
	return s
}

// fields adds t's fields to s, flattening embedded structs as encoding/json does.
func (g *generator) fields(path string, t reflect.Type, s *Schema) {
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			g.fields(path, f.Type, s)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fp := path + "." + name
		rel := strings.SplitN(fp, ".", 2)[1]
		if desc, ok := ignored[rel]; ok {
			fs := &Schema{Description: desc, ReadOnly: true}
			if f.Type.Kind() == reflect.Int64 {
				fs.Type = "integer"
			}
			s.Properties[name] = fs
			continue
		}
		fs := g.value(fp, f.Type)
		if d := g.comments[t.Name()].fields[f.Name]; d != "" {
			fs.Description = jsonName(d, f.Name, name)
		} else {
			// A field without its own comment takes the doc of the type it holds.
			et := elem(f.Type)
			subject := name
			switch f.Type.Kind() {
			case reflect.Slice:
				subject = "Each item"
			case reflect.Map:
				subject = "Each value"
			}
			fs.Description = jsonName(g.comments[et.Name()].doc, et.Name(), subject)
		}
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "inline") {
			s.Required = append(s.Required, name)
		}
		for i, e := range enums {
			if e.typ == t && e.field == name {
				g.used[i] = true
				target := fs
				switch {
				case fs.Type == "array":
					target = fs.Items
				case fs.Type == "object":
					fs.PropertyNames = &Schema{}
					target = fs.PropertyNames
				}
				target.Enum = e.values
			}
		}
		if d, ok := g.defaults[fp]; ok {
			fs.Default = d
		}
		s.Properties[name] = fs
	}
}

// value is the schema of a value of type t at path; list items and map values share
// their container's path.
func (g *generator) value(path string, t reflect.Type) *Schema {
	switch t.Kind() {
	case reflect.Pointer:
		return g.value(path, t.Elem())
	case reflect.Struct:
		return g.object(path, t)
	case reflect.Slice:
		return &Schema{Type: "array", Items: g.value(path, t.Elem())}
	case reflect.Map:
		if t.Elem().Kind() == reflect.Interface {
			// Free-form (a chart's values): any object; pkg/api only refuses
			// secret references in it, which a schema cannot state.
			return &Schema{Type: "object"}
		}
		return &Schema{Type: "object", AdditionalProperties: &Additional{Schema: g.value(path, t.Elem())}}
	case reflect.Interface:
		return &Schema{} // any value
	case reflect.String:
		return &Schema{Type: "string"}
	case reflect.Bool:
		return &Schema{Type: "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &Schema{Type: "integer"}
	}
	if g.err == nil {
		g.err = fmt.Errorf("schema: %s: no JSON Schema type for Go type %s", path, t)
	}
	return &Schema{}
}

// elem is the struct type t holds, through pointers, lists and maps.
func elem(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	return t
}

// jsonName makes a Go doc comment read in the manifest's words: "DriftCheckSeconds is
// how often" becomes "driftCheckSeconds is how often", and a type's "CNISpec names"
// becomes "cni names".
func jsonName(doc, goName, name string) string {
	if rest, ok := strings.CutPrefix(doc, goName+" "); ok {
		return name + " " + rest
	}
	return doc
}

// encode writes s as indented JSON ending in a newline.
func encode(file string, s *Schema) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // descriptions say <user>, not \u003cuser\u003e
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("schema: encode %s: %w", file, err)
	}
	return b.Bytes(), nil
}
