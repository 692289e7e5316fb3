package state

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/plinth-dev/plinth/pkg/api"
)

// AppRecord is one uploaded Application: the document as uploaded, which archive
// each of its charts comes from, what the operator last asked for, the leader's
// progress and the operator's overrides.
type AppRecord struct {
	Application api.Application `json:"application"`
	// Archives maps each chart's source.archive file name to the archive's digest
	// in the archive table.
	Archives map[string]string `json:"archives,omitempty"`
	// Desired is what the operator last asked for: AppDesiredApplied (app apply or
	// update of an applied application), AppDesiredRemoved (app remove), or ""
	// (uploaded, never applied).
	Desired string `json:"desired,omitempty"`
	// Op counts the operator's requests (apply, update, abort, remove). The leader
	// tags its progress with the Op it works for; progress for an older Op (a run
	// that an abort or a new apply superseded, or a deposed leader's) is refused.
	Op     uint64                `json:"op"`
	Status api.ApplicationStatus `json:"status"`
	// Overrides are the operator's values per chart (`app override set`), JSON maps.
	Overrides   map[string]json.RawMessage `json:"overrides,omitempty"`
	CreateIndex uint64                     `json:"createIndex"`
	ModifyIndex uint64                     `json:"modifyIndex"`
}

// What the operator asked of an application.
const (
	AppDesiredApplied = "applied"
	AppDesiredRemoved = "removed"
)

// Name is the application's name.
func (r AppRecord) Name() string { return r.Application.Metadata.Name }

// ArchiveRecord is one uploaded chart archive, kept once by content.
type ArchiveRecord struct {
	Digest string `json:"digest"` // "sha256:<hex>"
	Name   string `json:"name"`   // file name at first upload
	Size   int    `json:"size"`
	Data   []byte `json:"data"`
}

// ArchiveDigest is how the archive table keys content.
func ArchiveDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// App commands.
const (
	CmdAppUpload   = "AppUpload"
	CmdAppRequest  = "AppRequest"
	CmdAppProgress = "AppProgress"
	CmdAppOverride = "AppOverride"
)

// AppUpload stores an application and its chart archives. The server has decoded,
// validated and loaded every chart before proposing it.
type AppUpload struct {
	File        string          `json:"file,omitempty"`
	Application api.Application `json:"application"`
	Archives    []Archive       `json:"archives,omitempty"`
	// Update replaces an uploaded application (app update); without it an existing
	// name is refused.
	Update bool `json:"update,omitempty"`
}

// Archive is one chart archive of an upload.
type Archive struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// App request actions.
const (
	AppActionApply  = "apply"
	AppActionAbort  = "abort"
	AppActionRemove = "remove"
	AppActionDelete = "delete"
)

// AppRequest is an operator's lifecycle request.
type AppRequest struct {
	Name   string `json:"name"`
	Action string `json:"action"`
	// By names who asked (for the event).
	By string `json:"by,omitempty"`
}

// AppProgress is the leader's report on the run it does for Op.
type AppProgress struct {
	Name   string                `json:"name"`
	Op     uint64                `json:"op"`
	Status api.ApplicationStatus `json:"status"`
	// Events are recorded with the status (object "app/NAME" or "app/NAME/CHART").
	Events []Event `json:"events,omitempty"`
}

// AppOverride sets (or, with null Values, clears) the operator's values for a chart.
type AppOverride struct {
	Name   string          `json:"name"`
	Chart  string          `json:"chart"`
	Values json.RawMessage `json:"values"`
}

// AppRequestError is the FSM's refusal of a lifecycle request; it names what would
// work instead.
type AppRequestError struct{ Msg string }

func (e *AppRequestError) Error() string { return e.Msg }

func appObject(name string) string { return "app/" + name }

func (a *applier) app(name string) (*AppRecord, error) {
	r, ok := a.t.Apps[name]
	if !ok {
		return nil, fmt.Errorf("application %q: %w (see `plinth-coordinator app list`)", name, ErrNotFound)
	}
	return r, nil
}

func (a *applier) appUpload(b AppUpload) error {
	app := b.Application
	name := app.Metadata.Name
	prev, exists := a.t.Apps[name]
	switch {
	case exists && !b.Update:
		return &AppRequestError{Msg: fmt.Sprintf("application %q is already uploaded; change it with `plinth-coordinator app update -f FILE`", name)}
	case !exists && b.Update:
		return fmt.Errorf("application %q: %w: upload it first with `plinth-coordinator app upload -f FILE`", name, ErrNotFound)
	}
	if len(a.t.Apps) >= MaxApps && !exists {
		return &AppRequestError{Msg: fmt.Sprintf("the site holds %d applications, the most it keeps; delete one first", MaxApps)}
	}
	// Check everything before changing anything: app commands run on the live tables.
	given := map[string]string{}
	for _, ar := range b.Archives {
		given[ar.Name] = ArchiveDigest(ar.Data)
	}
	archives := map[string]string{}
	charts := map[string]bool{}
	for _, g := range app.Spec.Groups {
		for _, c := range g.Charts {
			charts[c.Name] = true
			if c.Source.Archive == "" {
				continue
			}
			d, ok := given[c.Source.Archive]
			if !ok {
				return fmt.Errorf("application %q chart %q: archive %q was not uploaded with it", name, c.Name, c.Source.Archive)
			}
			archives[c.Source.Archive] = d
		}
	}
	if exists && sameApp(prev, app, archives) {
		return nil // app update with nothing changed: no new generation, no rollout
	}
	for _, ar := range b.Archives {
		d := given[ar.Name]
		if _, ok := a.t.Archives[d]; !ok && archives[ar.Name] == d {
			a.t.Archives[d] = &ArchiveRecord{Digest: d, Name: ar.Name, Size: len(ar.Data), Data: ar.Data}
		}
	}
	rec := &AppRecord{Application: app, Archives: archives, CreateIndex: a.idx, ModifyIndex: a.idx}
	rec.Application.Metadata.Generation = 1
	rec.Status = api.ApplicationStatus{State: api.AppUploaded}
	verb := "uploaded"
	if exists {
		rec.Application.Metadata.Generation = prev.Application.Metadata.Generation + 1
		rec.CreateIndex, rec.Desired, rec.Op, rec.Status = prev.CreateIndex, prev.Desired, prev.Op, prev.Status
		// Overrides of charts the update dropped go with them.
		for chart, v := range prev.Overrides {
			if charts[chart] {
				if rec.Overrides == nil {
					rec.Overrides = map[string]json.RawMessage{}
				}
				rec.Overrides[chart] = v
			}
		}
		verb = "updated"
		if prev.Desired == AppDesiredApplied {
			// An update of an applied application rolls out at once (StarlingX's
			// application-update); otherwise it waits for app apply.
			rec.Op++
			a.startApply(rec)
			verb = "updated; applying"
		}
	}
	a.t.Apps[name] = rec
	a.gcArchives()
	a.event(EventNormal, appObject(name), "ApplicationUploaded", fmt.Sprintf("application %s generation %d %s from %s", name, rec.Application.Metadata.Generation, verb, nonEmpty(b.File, "the API")))
	return nil
}

// sameApp reports whether an update would store what prev holds already.
func sameApp(prev *AppRecord, app api.Application, archives map[string]string) bool {
	a, err1 := json.Marshal([]any{prev.Application.Metadata.Labels, prev.Application.Spec})
	b, err2 := json.Marshal([]any{app.Metadata.Labels, app.Spec})
	if err1 != nil || err2 != nil || string(a) != string(b) || len(prev.Archives) != len(archives) {
		return false
	}
	for k, d := range archives {
		if prev.Archives[k] != d {
			return false
		}
	}
	return true
}

// MaxApps bounds the applications one site keeps.
const MaxApps = 100

// startApply marks rec as applying its current generation: every chart pending.
func (a *applier) startApply(rec *AppRecord) {
	prev := map[string]api.ChartStatus{}
	for _, c := range rec.Status.Charts {
		prev[c.Chart] = c
	}
	st := api.ApplicationStatus{
		State:              api.AppApplying,
		Generation:         rec.Application.Metadata.Generation,
		ObservedGeneration: rec.Status.ObservedGeneration,
		Progress:           "waiting for the leader to start",
	}
	for _, g := range rec.Application.Spec.Groups {
		for _, c := range g.Charts {
			cs := api.ChartStatus{Group: g.Name, Chart: c.Name, Release: c.Release, Namespace: c.Namespace, State: api.ChartPending}
			if p, ok := prev[c.Name]; ok {
				cs.Revision, cs.ChartDigest, cs.ValuesDigest, cs.Updated = p.Revision, p.ChartDigest, p.ValuesDigest, p.Updated
			}
			st.Charts = append(st.Charts, cs)
		}
	}
	rec.Status = st
	rec.ModifyIndex = a.idx
}

func (a *applier) appRequest(b AppRequest) error {
	rec, err := a.app(b.Name)
	if err != nil {
		return err
	}
	state := rec.Status.State
	by := nonEmpty(b.By, "the operator")
	switch b.Action {
	case AppActionApply:
		if state == api.AppRemoving {
			return &AppRequestError{Msg: fmt.Sprintf("application %q is being removed; wait for it (`app status %s --watch`) or `app abort %s` first", b.Name, b.Name, b.Name)}
		}
		rec.Desired = AppDesiredApplied
		rec.Op++
		a.startApply(rec)
		a.event(EventNormal, appObject(b.Name), "ApplyRequested", fmt.Sprintf("application %s generation %d: apply requested by %s", b.Name, rec.Application.Metadata.Generation, by))
	case AppActionAbort:
		var next string
		switch state {
		case api.AppApplying:
			next = api.AppApplyFailed
		case api.AppRemoving:
			next = api.AppRemoveFailed
		default:
			return &AppRequestError{Msg: fmt.Sprintf("application %q is %s: only an applying or removing application can be aborted", b.Name, state)}
		}
		rec.Op++
		rec.Status.State = next
		rec.Status.Progress = "aborted by " + by
		for i := range rec.Status.Charts {
			if c := &rec.Status.Charts[i]; c.State == api.ChartApplying || c.State == api.ChartRemoving || c.State == api.ChartWaiting {
				c.State, c.WaitingFor, c.Message = api.ChartFailed, "", "aborted while "+c.State
			}
		}
		rec.Status.Conditions = setAppCondition(rec.Status.Conditions, api.Condition{
			Type: "Applied", Status: "False", Reason: "Aborted", LastTransitionTime: a.now,
			Message: fmt.Sprintf("aborted by %s; run `plinth-coordinator app apply %s` to try again or `app remove %s`", by, b.Name, b.Name),
		})
		rec.ModifyIndex = a.idx
		a.event(EventWarning, appObject(b.Name), "Aborted", fmt.Sprintf("application %s: %s aborted by %s", b.Name, strings.TrimSuffix(state, "ing"), by))
	case AppActionRemove:
		if state == api.AppUploaded && rec.Desired == "" {
			return &AppRequestError{Msg: fmt.Sprintf("application %q was never applied: nothing to remove (`app delete %s` drops it)", b.Name, b.Name)}
		}
		rec.Desired = AppDesiredRemoved
		rec.Op++
		rec.Status.State = api.AppRemoving
		rec.Status.Progress = "waiting for the leader to start"
		rec.ModifyIndex = a.idx
		a.event(EventNormal, appObject(b.Name), "RemoveRequested", fmt.Sprintf("application %s: remove requested by %s", b.Name, by))
	case AppActionDelete:
		if state != api.AppUploaded {
			return &AppRequestError{Msg: fmt.Sprintf("application %q is %s: `app remove %s` its releases first, then delete it", b.Name, state, b.Name)}
		}
		delete(a.t.Apps, b.Name)
		a.gcArchives()
		a.event(EventNormal, appObject(b.Name), "ApplicationDeleted", fmt.Sprintf("application %s deleted by %s", b.Name, by))
	default:
		return fmt.Errorf("state: unknown application action %q (valid: apply, abort, remove, delete)", b.Action)
	}
	return nil
}

func (a *applier) appProgress(b AppProgress) error {
	rec, err := a.app(b.Name)
	if err != nil {
		return err
	}
	if b.Op != rec.Op {
		return &AppRequestError{Msg: fmt.Sprintf("application %q: progress for request %d refused; the current request is %d", b.Name, b.Op, rec.Op)}
	}
	st := b.Status
	if st.State == api.AppUploaded && rec.Desired == AppDesiredRemoved {
		rec.Desired = "" // removal done: back to uploaded, as StarlingX does
	}
	for _, c := range rec.Status.Conditions {
		if i := condIndex(st.Conditions, c.Type); i >= 0 && st.Conditions[i].Status == c.Status {
			st.Conditions[i].LastTransitionTime = c.LastTransitionTime
		}
	}
	for i := range st.Conditions {
		if st.Conditions[i].LastTransitionTime.IsZero() {
			st.Conditions[i].LastTransitionTime = a.now
		}
	}
	rec.Status = st
	rec.ModifyIndex = a.idx
	for _, e := range b.Events {
		a.event(e.Type, e.Object, e.Reason, e.Message)
	}
	return nil
}

func (a *applier) appOverride(b AppOverride) error {
	rec, err := a.app(b.Name)
	if err != nil {
		return err
	}
	found := false
	var names []string
	for _, g := range rec.Application.Spec.Groups {
		for _, c := range g.Charts {
			found = found || c.Name == b.Chart
			names = append(names, c.Name)
		}
	}
	if !found {
		return fmt.Errorf("application %q has no chart %q (its charts: %s): %w", b.Name, b.Chart, strings.Join(names, ", "), ErrNotFound)
	}
	if len(b.Values) == 0 || string(b.Values) == "null" {
		delete(rec.Overrides, b.Chart)
	} else {
		var m map[string]any
		if err := json.Unmarshal(b.Values, &m); err != nil {
			return fmt.Errorf("application %q chart %q: overrides must be a mapping: %w", b.Name, b.Chart, err)
		}
		if rec.Overrides == nil {
			rec.Overrides = map[string]json.RawMessage{}
		}
		rec.Overrides[b.Chart] = b.Values
	}
	rec.ModifyIndex = a.idx
	a.event(EventNormal, appObject(b.Name)+"/"+b.Chart, "OverridesChanged", fmt.Sprintf("application %s chart %s: user overrides changed; `app apply %s` rolls them out", b.Name, b.Chart, b.Name))
	return nil
}

// gcArchives drops archives no application refers to.
func (a *applier) gcArchives() {
	used := map[string]bool{}
	for _, r := range a.t.Apps {
		for _, d := range r.Archives {
			used[d] = true
		}
	}
	for d := range a.t.Archives {
		if !used[d] {
			delete(a.t.Archives, d)
		}
	}
}

func condIndex(cs []api.Condition, typ string) int {
	for i, c := range cs {
		if c.Type == typ {
			return i
		}
	}
	return -1
}

func setAppCondition(cs []api.Condition, c api.Condition) []api.Condition {
	out := append([]api.Condition(nil), cs...)
	if i := condIndex(out, c.Type); i >= 0 {
		if out[i].Status == c.Status {
			c.LastTransitionTime = out[i].LastTransitionTime
		}
		out[i] = c
		return out
	}
	return append(out, c)
}

// Apps returns every application, by name, without archive bytes.
func (v View) Apps() []AppRecord {
	out := make([]AppRecord, 0, len(v.t.Apps))
	for _, r := range v.t.Apps {
		out = append(out, copyApp(r))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// App returns one application.
func (v View) App(name string) (AppRecord, bool) {
	r, ok := v.t.Apps[name]
	if !ok {
		return AppRecord{}, false
	}
	return copyApp(r), true
}

// Archive returns an archive by digest. Its Data is shared: never modify it.
func (v View) Archive(digest string) (ArchiveRecord, bool) {
	r, ok := v.t.Archives[digest]
	if !ok {
		return ArchiveRecord{}, false
	}
	return *r, true
}

// copyApp deep-copies a record through JSON: the spec holds free-form values.
func copyApp(r *AppRecord) AppRecord {
	var out AppRecord
	data, err := json.Marshal(r)
	if err == nil {
		err = json.Unmarshal(data, &out)
	}
	if err != nil {
		return *r // cannot happen for a record that was decoded from JSON
	}
	return out
}

// AppDetail is an application with its events, for `describe application`.
type AppDetail struct {
	App    AppRecord `json:"app"`
	Events []Event   `json:"events"`
}

// appChanges is the application part of Changes: what `app upload --dry-run` and
// `app update --dry-run` print.
func appChanges(before, after View) []string {
	var out []string
	for _, r := range after.Apps() {
		prev, had := before.App(r.Name())
		if !had {
			out = append(out, fmt.Sprintf("+ application %s (generation %d)", r.Name(), r.Application.Metadata.Generation))
			for _, g := range r.Application.Spec.Groups {
				for _, c := range g.Charts {
					out = append(out, fmt.Sprintf("+ chart %s/%s: release %s in namespace %s from %s", g.Name, c.Name, c.Release, c.Namespace, sourceOf(c.Source)))
				}
			}
			continue
		}
		if prev.Application.Metadata.Generation == r.Application.Metadata.Generation {
			continue
		}
		out = append(out, fmt.Sprintf("~ application %s: generation %d -> %d", r.Name(), prev.Application.Metadata.Generation, r.Application.Metadata.Generation))
		old := map[string]api.Chart{}
		oldGroup := map[string]string{}
		for _, g := range prev.Application.Spec.Groups {
			for _, c := range g.Charts {
				old[c.Name], oldGroup[c.Name] = c, g.Name
			}
		}
		for _, g := range r.Application.Spec.Groups {
			for _, c := range g.Charts {
				o, ok := old[c.Name]
				delete(old, c.Name)
				switch {
				case !ok:
					out = append(out, fmt.Sprintf("+ chart %s/%s: release %s in namespace %s from %s", g.Name, c.Name, c.Release, c.Namespace, sourceOf(c.Source)))
				default:
					var what []string
					if oldGroup[c.Name] != g.Name {
						what = append(what, "group "+oldGroup[c.Name]+" -> "+g.Name)
					}
					if o.Source != c.Source || (c.Source.Archive != "" && prev.Archives[c.Source.Archive] != r.Archives[c.Source.Archive]) {
						what = append(what, "chart source or archive")
					}
					if !jsonEqual(o.Values, c.Values) {
						what = append(what, "values")
					}
					o.Source, o.Values, c.Values = c.Source, nil, nil
					if !jsonEqual(o, c) {
						what = append(what, "release settings")
					}
					if len(what) > 0 {
						out = append(out, fmt.Sprintf("~ chart %s/%s: %s changed", g.Name, c.Name, strings.Join(what, ", ")))
					}
				}
			}
		}
		gone := make([]string, 0, len(old))
		for n := range old {
			gone = append(gone, n)
		}
		sort.Strings(gone)
		for _, n := range gone {
			out = append(out, fmt.Sprintf("- chart %s/%s: release %s in namespace %s is uninstalled at the next apply", oldGroup[n], n, old[n].Release, old[n].Namespace))
		}
		if r.Status.State == api.AppApplying && r.Op != prev.Op {
			out = append(out, fmt.Sprintf("  application %s is applied: the update rolls out at once", r.Name()))
		} else {
			out = append(out, fmt.Sprintf("  `plinth-coordinator app apply %s` rolls it out", r.Name()))
		}
	}
	for _, r := range before.Apps() {
		if _, ok := after.App(r.Name()); !ok {
			out = append(out, "- application "+r.Name())
		}
	}
	return out
}

func sourceOf(s api.ChartSource) string {
	switch {
	case s.Archive != "":
		return "archive " + s.Archive
	case s.OCI != "":
		return s.OCI
	default:
		return fmt.Sprintf("repository %s chart %s version %s", s.Repo, s.Chart, nonEmpty(s.Version, "latest"))
	}
}

func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
