package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/plinth-dev/plinth/pkg/secretref"
)

// checkType compares a generic JSON value against the Go type it will be decoded into
// and reports every unknown field and wrong type, with a path in this package's naming.
// encoding/json cannot do this: it stops at the first problem and its messages carry no
// usable path (and DisallowUnknownFields still matches keys case-insensitively).
func checkType(path string, v any, t reflect.Type) []FieldError {
	var c typeChecker
	c.check(path, v, t)
	return c.errs
}

type typeChecker struct{ errs []FieldError }

func (c *typeChecker) add(path, msg string) {
	c.errs = append(c.errs, FieldError{Path: path, Msg: msg})
}

// secretRef refuses a secret reference in any string of a manifest (a value or a map
// key): only the planner writes them, so a manifest can never hand a host a secret.
func (c *typeChecker) secretRef(path, s string) {
	if secretref.Contains(s) {
		c.add(path, fmt.Sprintf("holds %q: strings containing %q are secret references, which only the coordinators write; a manifest cannot reference secrets",
			clip(s), secretref.Prefix))
	}
}

// namedLists are the list element types indexed by their name in paths; everything
// else (interfaces, routes, strings) is indexed by position.
var namedLists = map[reflect.Type]bool{
	reflect.TypeFor[Network]():    true,
	reflect.TypeFor[CephPool]():   true,
	reflect.TypeFor[ChartGroup](): true,
	reflect.TypeFor[Chart]():      true,
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

func (c *typeChecker) check(path string, v any, t reflect.Type) {
	if v == nil {
		return // null leaves the zero value, as with encoding/json
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return // custom decoding (time.Time); the real decode reports its errors
	}
	switch t.Kind() {
	case reflect.Pointer:
		c.check(path, v, t.Elem())
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			c.mismatch(path, "a mapping", v)
			return
		}
		fields, names := jsonFields(t)
		for _, name := range names {
			if fv, ok := obj[name]; ok {
				c.check(join(path, name), fv, fields[name])
			}
		}
		var unknown []string
		for k := range obj {
			if _, ok := fields[k]; !ok {
				unknown = append(unknown, k)
			}
		}
		slices.Sort(unknown)
		for _, k := range unknown {
			c.add(join(path, k), fmt.Sprintf("unknown field %q; valid fields are %s", clip(k), strings.Join(names, ", ")))
		}
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			c.mismatch(path, "a list", v)
			return
		}
		for i, e := range arr {
			k := strconv.Itoa(i)
			if namedLists[t.Elem()] {
				name, _ := lookup(e, "name").(string)
				k = key(name, i)
			}
			c.check(index(path, k), e, t.Elem())
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			c.mismatch(path, "a mapping", v)
			return
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			c.secretRef(index(path, mapKey(k)), k)
			c.check(index(path, mapKey(k)), obj[k], t.Elem())
		}
	case reflect.Interface:
		c.free(path, v)
	case reflect.String:
		if str, ok := v.(string); !ok {
			c.mismatch(path, "a string", v)
		} else {
			c.secretRef(path, str)
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			c.mismatch(path, "true or false", v)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			c.mismatch(path, "an integer", v)
			return
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			if errors.Is(err, strconv.ErrRange) {
				c.add(path, fmt.Sprintf("%s is out of range", clip(string(n))))
			} else {
				c.mismatch(path, "an integer", v)
			}
		}
	}
}

// free walks a value of an interface-typed field (an application chart's values):
// any shape is valid there, but a secret reference is refused in it as everywhere.
func (c *typeChecker) free(path string, v any) {
	switch v := v.(type) {
	case string:
		c.secretRef(path, v)
	case []any:
		for i, e := range v {
			c.free(index(path, strconv.Itoa(i)), e)
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			c.secretRef(index(path, mapKey(k)), k)
			c.free(index(path, mapKey(k)), v[k])
		}
	}
}

func (c *typeChecker) mismatch(path, want string, v any) {
	msg := fmt.Sprintf("expected %s, got %s", want, describe(v))
	if want == "a string" {
		switch v.(type) {
		case json.Number, bool:
			// YAML turned an unquoted 1.30 into 1.3 or "on" into true.
			msg += "; quote the value to keep it a string"
		}
	}
	c.add(path, msg)
}

// jsonFields maps JSON names to field types the way encoding/json does, flattening
// embedded structs without a name (TypeMeta). names keeps declaration order.
func jsonFields(t reflect.Type) (map[string]reflect.Type, []string) {
	fields := map[string]reflect.Type{}
	var names []string
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for f := range t.Fields() {
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := fields[name]; !dup {
				fields[name] = f.Type
				names = append(names, name)
			}
		}
	}
	walk(t)
	return fields, names
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// describe names a generic JSON value for an error message.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return "string " + strconv.Quote(clip(v))
	case json.Number:
		return "number " + clip(string(v))
	case bool:
		return "boolean " + strconv.FormatBool(v)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

// clip keeps hostile or accidental megabyte values out of error messages.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
