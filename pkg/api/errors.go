package api

import (
	"strconv"
	"strings"
)

// FieldError is one problem in a manifest, located precisely enough that an operator
// can find it without re-reading the whole file: the file, the 1-based document within
// it and the field path. Any part may be empty (zero for Doc) when it is unknown, for
// example when the coordinator validates stored state that came from several files.
type FieldError struct {
	File string
	Doc  int
	Path string
	Msg  string
}

// Error renders "site.yaml: document 3: hosts[compute-0].spec.interfaces[1].mtu: 70000 is
// above 65535", leaving out the parts that are unknown.
func (e FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Doc > 0 {
		b.WriteString("document ")
		b.WriteString(strconv.Itoa(e.Doc))
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList carries every problem found, so an operator fixes a manifest in one pass
// instead of one error per run.
type ErrorList []FieldError

// Error renders one problem per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Err returns the list as an error, or nil when it is empty. It exists because a nil
// ErrorList stored in an error interface is not a nil error.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Unwrap exposes each FieldError to errors.As.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// key renders a list index for a field path. Named things are indexed by name, which
// survives reordering and is what an operator searches for; unnamed ones by position.
// Names that are not plain labels (or that look like a position) are quoted so the path
// stays unambiguous.
func key(name string, i int) string {
	if name == "" {
		return strconv.Itoa(i)
	}
	return mapKey(name)
}

// Elem is the path of element i of the list at path, by its name when it has one (see
// key): hosts[compute-0], interfaces[1]. Checks made outside this package, such as the
// planner's against a host's facts, use it so their paths read like validation's.
func Elem(path, name string, i int) string { return index(path, key(name, i)) }

// mapKey renders a name or map key for a path, quoted unless it is a plain label.
func mapKey(k string) string {
	if isDNSLabel(k) && !allDigits(k) {
		return k
	}
	return strconv.Quote(clip(k))
}

// index appends "[k]" to a path.
func index(path, k string) string { return path + "[" + k + "]" }

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// isDNSLabel reports whether s is an RFC 1123 label: names become hostnames, Kubernetes
// node names and Helm release names, which all require it.
func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		if !alnum && (c != '-' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}
