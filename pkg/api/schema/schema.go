// Package schema describes the site manifest's documents (Site, Host) as JSON Schema
// (draft 2020-12), generated from pkg/api's Go types: field names and types from
// reflection and json tags, descriptions from the fields' doc comments, allowed values
// from pkg/api's valid-value lists and defaults from running pkg/api's own defaulting.
//
// It owns that translation and the lookup of a dotted path (site.spec.kubernetes) in
// the result, for `plinth-coordinator explain` and for editors. It never decides what
// is valid: pkg/api's Decode and Validate stay the judges, and the schema is only as
// strict as what they can state as types, required fields and enums.
//
// The generated files are committed (docs/schema/*.json for editors, and a copy here
// that the CLI embeds): one per kind, and manifest.json, which applies the right one
// to each document of a multi-document file by its kind; `go generate ./pkg/api/schema` rewrites both and a test fails
// when they are stale.
package schema

//go:generate go run ./gen -api .. -embed . -docs ../../../docs/schema

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/plinth-dev/plinth/pkg/api"
)

// Draft is the JSON Schema dialect of the generated files.
const Draft = "https://json-schema.org/draft/2020-12/schema"

// Schema is the subset of JSON Schema the generator writes.
type Schema struct {
	Schema      string `json:"$schema,omitempty"`
	ID          string `json:"$id,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// Type is empty for a value the decoder ignores (status).
	Type     string   `json:"type,omitempty"`
	Const    string   `json:"const,omitempty"`
	Enum     []string `json:"enum,omitempty"`
	Default  any      `json:"default,omitempty"`
	ReadOnly bool     `json:"readOnly,omitempty"`
	// Properties of an object, with the ones that must be set in Required.
	Properties map[string]*Schema `json:"properties,omitempty"`
	Required   []string           `json:"required,omitempty"`
	// AdditionalProperties is false for a struct (unknown fields are errors) and the
	// value schema for a map.
	AdditionalProperties *Additional `json:"additionalProperties,omitempty"`
	PropertyNames        *Schema     `json:"propertyNames,omitempty"`
	Items                *Schema     `json:"items,omitempty"`
	// Ref, AllOf, If and Then only appear in manifest.json, which picks a
	// document's schema by its kind.
	Ref   string    `json:"$ref,omitempty"`
	AllOf []*Schema `json:"allOf,omitempty"`
	If    *Schema   `json:"if,omitempty"`
	Then  *Schema   `json:"then,omitempty"`
}

// Additional is JSON Schema's additionalProperties: a schema, or false.
type Additional struct {
	Schema *Schema
}

func (a Additional) MarshalJSON() ([]byte, error) {
	if a.Schema == nil {
		return []byte("false"), nil
	}
	return json.Marshal(a.Schema)
}

func (a *Additional) UnmarshalJSON(b []byte) error {
	switch string(bytes.TrimSpace(b)) {
	case "false":
		a.Schema = nil
		return nil
	case "true":
		a.Schema = &Schema{}
		return nil
	}
	a.Schema = &Schema{}
	return json.Unmarshal(b, a.Schema)
}

// IsRequired says whether the object s requires its property name.
func (s *Schema) IsRequired(name string) bool { return slices.Contains(s.Required, name) }

// Children are the properties of s, or of the items or values it holds, sorted by
// name: what a path can continue with after s.
func (s *Schema) Children() (map[string]*Schema, []string) {
	o := s.Object()
	if o == nil {
		return nil, nil
	}
	names := make([]string, 0, len(o.Properties))
	for n := range o.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	return o.Properties, names
}

// Object is the object schema s is or holds (through list items and map values),
// or nil for a scalar or a list of scalars.
func (s *Schema) Object() *Schema {
	for s != nil {
		switch {
		case s.Type == "object" && len(s.Properties) > 0:
			return s
		case s.Type == "array":
			s = s.Items
		case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
			s = s.AdditionalProperties.Schema
		default:
			return nil
		}
	}
	return nil
}

// TypeName is a short Go-like name of the type: string, integer, []string,
// map[string]object.
func (s *Schema) TypeName() string {
	switch {
	case s == nil:
		return "any"
	case s.Type == "array":
		return "[]" + s.Items.TypeName()
	case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		return "map[string]" + s.AdditionalProperties.Schema.TypeName()
	case s.Type == "":
		return "any"
	}
	return s.Type
}

// Document is the generated schema of one document kind.
type Document struct {
	Kind string // api.KindSite
	// Root is the lowercase kind a path starts with: site, host.
	Root   string
	File   string // file name under docs/schema and in this package
	Schema *Schema
}

// kind is one document the schema covers: a row of api.DocumentKinds.
type kind struct {
	kind, root, file string
	typ              reflect.Type
}

// kinds are the documents the schema covers, in the order of api.DocumentKinds.
func kinds() []kind {
	var out []kind
	for _, k := range api.DocumentKinds() {
		out = append(out, kind{k.Kind, k.Name, k.Name + ".json", k.Type})
	}
	return out
}

// The schema of every document kind and of the manifest, as go generate wrote them.
//
//go:embed *.json
var embedded embed.FS

// Documents returns the schemas the CLI was built with.
func Documents() ([]Document, error) {
	var out []Document
	for _, k := range kinds() {
		b, err := embedded.ReadFile(k.file)
		if err != nil {
			return nil, fmt.Errorf("schema: read embedded %s: %w", k.file, err)
		}
		var s Schema
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("schema: decode embedded %s: %w", k.file, err)
		}
		out = append(out, Document{Kind: k.kind, Root: k.root, File: k.file, Schema: &s})
	}
	return out, nil
}

// Field is what a path names: the schema at the end of it and where it is.
type Field struct {
	Document Document
	Path     string // canonical dotted path: site.spec.kubernetes
	Name     string // last element: kubernetes (the root's is the kind's root)
	Schema   *Schema
	// Required says whether the parent object requires this field.
	Required bool
}

// Find resolves a dotted path such as site.spec.kubernetes or host.spec.interfaces.bond
// (list items and map values are passed through, as in kubectl explain). The first
// element is a kind, in any case and singular or plural. An unknown element is an
// error naming the path so far and its valid children.
func Find(docs []Document, path string) (Field, error) {
	parts := strings.Split(strings.Trim(path, "."), ".")
	root := strings.ToLower(parts[0])
	var doc *Document
	var roots []string
	for i := range docs {
		roots = append(roots, docs[i].Root)
		if root == docs[i].Root || root == docs[i].Root+"s" {
			doc = &docs[i]
		}
	}
	if doc == nil {
		return Field{}, fmt.Errorf("%s: no such kind; valid kinds are %s", parts[0], strings.Join(roots, ", "))
	}
	f := Field{Document: *doc, Path: doc.Root, Name: doc.Root, Schema: doc.Schema, Required: true}
	for _, p := range parts[1:] {
		props, names := f.Schema.Children()
		if len(names) == 0 {
			return Field{}, fmt.Errorf("%s.%s: no such field; %s is a %s and has no fields", f.Path, p, f.Path, f.Schema.TypeName())
		}
		name := p
		if _, ok := props[name]; !ok {
			name = ""
			for _, n := range names {
				if strings.EqualFold(n, p) {
					name = n
				}
			}
			if name == "" {
				return Field{}, fmt.Errorf("%s.%s: no such field; %s has: %s", f.Path, p, f.Path, strings.Join(names, ", "))
			}
		}
		parent := f.Schema.Object()
		f = Field{Document: *doc, Path: f.Path + "." + name, Name: name, Schema: props[name], Required: parent.IsRequired(name)}
	}
	return f, nil
}
