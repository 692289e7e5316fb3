package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Decode parses a multi-document site manifest. It is strict on purpose: a misspelt
// field in an installer silently becomes a default and a wrong machine, so unknown
// fields, wrong types, unsupported apiVersion/kind and a second Site are all errors.
//
// Every problem in every document is reported at once as an ErrorList (returned with a
// nil Manifest). Fields owned by the coordinator (status, metadata.generation) are
// dropped from the input. Decode does not apply defaults or semantic validation; see
// Default and Validate.
func Decode(file string, data []byte) (*Manifest, error) {
	d := decoder{file: file, m: &Manifest{}}
	if len(data) > MaxManifestBytes {
		d.add(0, "", fmt.Sprintf("is %d bytes; a manifest may be at most %d bytes (%d MiB): split it and apply the parts one after another",
			len(data), MaxManifestBytes, MaxManifestBytes>>20))
		return nil, d.errs
	}
	doc := 0
	for _, c := range splitDocuments(data) {
		j, err := yamlToJSON(c.text)
		if err != nil {
			doc++
			d.add(doc, "", "invalid YAML: "+yamlMessage(err, c.line-1))
			continue
		}
		if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
			// Empty (or comment-only) document. An explicit "---" still counts so that
			// numbering matches what the operator sees; a blank preamble does not.
			if c.explicit {
				doc++
			}
			continue
		}
		doc++
		d.document(doc, j)
	}
	d.duplicates()
	if len(d.m.Hosts) > MaxHostsPerManifest {
		d.add(0, "", fmt.Sprintf("declares %d hosts; one manifest may declare at most %d: split it and apply the parts one after another",
			len(d.m.Hosts), MaxHostsPerManifest))
	}
	if len(d.errs) == 0 && d.m.Site == nil && len(d.m.Hosts) == 0 && len(d.m.Applications) == 0 {
		d.add(0, "", "holds no document: a manifest has a Site, Host or Application documents "+
			"(apiVersion: "+APIVersion+", kind: "+kindList("or")+"); an empty file changes nothing, so it is refused")
	}
	if len(d.errs) > 0 {
		return nil, d.errs
	}
	return d.m, nil
}

// Limits on one manifest. Everything applied is kept in the replicated state and
// replayed by every coordinator, so a runaway file is refused, saying which limit.
const (
	MaxManifestBytes    = 4 << 20
	MaxHostsPerManifest = 5000
)

// duplicates refuses a host declared twice in one file: the later document would
// silently win.
func (d *decoder) duplicates() {
	first := map[string]int{}
	for _, h := range d.m.Hosts {
		name := h.Metadata.Name
		if name == "" {
			continue
		}
		if doc, ok := first[name]; ok {
			d.add(h.docIndex, index("hosts", name)+".metadata.name",
				fmt.Sprintf("host %q is declared twice in this file (documents %d and %d); declare each host once", name, doc, h.docIndex))
			continue
		}
		first[name] = h.docIndex
	}
}

type decoder struct {
	file  string
	m     *Manifest
	hosts int // Host documents seen, to name unnamed hosts in paths
	apps  int // Application documents seen, likewise
	errs  ErrorList
}

func (d *decoder) add(doc int, path, msg string) {
	d.errs = append(d.errs, FieldError{File: d.file, Doc: doc, Path: path, Msg: msg})
}

// document decodes one non-empty document given as JSON.
func (d *decoder) document(doc int, j []byte) {
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber() // keep integers exact for range checks
	var v any
	if err := dec.Decode(&v); err != nil {
		d.add(doc, "", fmt.Sprintf("cannot read document: %v", err))
		return
	}
	obj, ok := v.(map[string]any)
	if !ok {
		d.add(doc, "", fmt.Sprintf("expected a mapping with apiVersion and kind, got %s", describe(v)))
		return
	}

	// apiVersion and kind decide what the rest means, so check them first and stop here
	// if they are wrong rather than report a pile of misleading unknown fields.
	bad := false
	if av, ok := obj["apiVersion"].(string); !ok || av != APIVersion {
		d.add(doc, "apiVersion", fmt.Sprintf("%s is not supported; valid: %q", got(obj, "apiVersion"), APIVersion))
		bad = true
	}
	kindName, _ := obj["kind"].(string)
	kind, ok := LookupDocumentKind(kindName)
	if !ok {
		d.add(doc, "kind", fmt.Sprintf("%s is not a valid kind; valid kinds are %s", got(obj, "kind"), kindList("and")))
		bad = true
	}
	if bad {
		return
	}

	// The coordinator owns these; an exported-then-edited manifest must not fake them.
	delete(obj, "status")
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "generation")
	}

	root, target, ok := kind.start(d, doc, obj)
	if !ok {
		return
	}

	n := len(d.errs)
	for _, e := range checkType(root, obj, reflect.TypeOf(target).Elem()) {
		d.add(doc, e.Path, e.Msg)
	}
	if len(d.errs) > n {
		return
	}
	// The shape is known to be right, so a plain decode of the cleaned document cannot
	// lose anything; still, never trust it blindly.
	clean, err := json.Marshal(obj)
	if err == nil {
		err = json.Unmarshal(clean, target)
	}
	if err != nil {
		d.add(doc, root, fmt.Sprintf("cannot decode: %v", err))
		return
	}
	kind.keep(d.m, doc, target)
}

// got describes obj[field] for an error message.
func got(obj map[string]any, field string) string {
	v, ok := obj[field]
	if !ok {
		return "missing"
	}
	if s, ok := v.(string); ok {
		return strconv.Quote(clip(s))
	}
	return describe(v)
}

// lookup walks nested mappings, returning nil when any step is missing.
func lookup(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// yamlToJSON converts one YAML document. The YAML library is third-party code fed
// arbitrary operator bytes; a panic there must become an error, not a crashed
// coordinator.
func yamlToJSON(y []byte) (j []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			j, err = nil, fmt.Errorf("YAML parser failed: %v", r)
		}
	}()
	// Strict: duplicate keys are an error rather than last-one-wins.
	return yaml.YAMLToJSONStrict(y)
}

var lineRE = regexp.MustCompile(`\bline (\d+)`)

// yamlMessage tidies a YAML error and shifts its line numbers, which count from the
// start of the document, so they count from the start of the file.
func yamlMessage(err error, offset int) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:")
	msg = strings.Join(strings.Fields(msg), " ")
	return lineRE.ReplaceAllStringFunc(msg, func(s string) string {
		n, err := strconv.Atoi(strings.TrimPrefix(s, "line "))
		if err != nil {
			return s
		}
		return "line " + strconv.Itoa(n+offset)
	})
}

// chunk is the text of one YAML document.
type chunk struct {
	line     int  // 1-based line of the file the text starts on
	explicit bool // started by "---"
	text     []byte
}

// splitDocuments splits a YAML stream into documents. Per the YAML spec, a line starting
// with "---" or "..." followed by a blank or the end of the line is a document marker
// wherever it appears (it cannot occur inside a scalar), so a line scan is exact. It
// must be: the YAML library reads only the first document of what it is given and
// would silently drop the rest.
func splitDocuments(data []byte) []chunk {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var out []chunk
	cur := chunk{line: 1}
	line := 0
	for len(data) > 0 {
		line++
		l := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
		switch {
		case isMarker(l, "---"):
			out = append(out, cur)
			// Content may follow the marker on the same line ("--- {kind: Host}").
			cur = chunk{line: line, explicit: true, text: append([]byte(nil), l[3:]...)}
		case isMarker(l, "..."):
			out = append(out, cur)
			cur = chunk{line: line + 1}
		default:
			cur.text = append(cur.text, l...)
		}
	}
	return append(out, cur)
}

func isMarker(l []byte, m string) bool {
	if !bytes.HasPrefix(l, []byte(m)) {
		return false
	}
	return len(l) == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\n' || l[3] == '\r'
}
