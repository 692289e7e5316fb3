package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/plinth-dev/plinth/pkg/apprunner"
	"github.com/plinth-dev/plinth/pkg/pki"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/appplan"
	"github.com/plinth-dev/plinth/pkg/helmrelease"
	"github.com/plinth-dev/plinth/pkg/secretref"
	"github.com/plinth-dev/plinth/pkg/state"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// Applications: uploads are checked here (decode, validate, every chart archive
// loaded and rendered with the values it will get) so the FSM stores only what
// the leader can install; lifecycle requests and overrides become commands; reads
// come from the replicated state, and history from the cluster's Helm records.

// MaxOverrideBytes bounds one chart's user overrides (`app override set`).
const MaxOverrideBytes = 1 << 20

// maxUploadBody bounds an upload's JSON body: MaxUploadBytes of document and
// archives, base64-encoded, with room for the field names.
const maxUploadBody = api.MaxUploadBytes*4/3 + 64<<10

func (s *Server) appRoutes() {
	s.handle("POST "+wire.PathApps, admins, s.appUpload)
	s.handle("GET "+wire.PathApps, readers, s.appList)
	s.handle("GET "+wire.PathApps+"/{name}", readers, s.appGet)
	s.handle("DELETE "+wire.PathApps+"/{name}", admins, s.appAction(state.AppActionDelete))
	for _, a := range []string{state.AppActionApply, state.AppActionAbort, state.AppActionRemove} {
		s.handle("POST "+wire.PathApps+"/{name}/"+a, admins, s.appAction(a))
	}
	s.handle("GET "+wire.PathApps+"/{name}/history", readers, s.appHistory)
	ov := wire.PathApps + "/{name}/charts/{chart}/overrides"
	s.handle("PUT "+ov, admins, s.appOverrideSet)
	s.handle("DELETE "+ov, admins, s.appOverrideClear)
	s.handle("GET "+ov, readers, s.appOverridesShow)
}

func queryBool(r *http.Request, key string) (bool, error) {
	v := r.URL.Query().Get(key)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, &httpError{http.StatusBadRequest, fmt.Sprintf("%s: want true or false, got %q", key, v)}
	}
	return b, nil
}

func (s *Server) appUpload(w http.ResponseWriter, r *http.Request) error {
	update, err := queryBool(r, wire.QueryUpdate)
	if err != nil {
		return err
	}
	dryRun, err := queryBool(r, wire.QueryDryRun)
	if err != nil {
		return err
	}
	var req wire.AppUpload
	limit := fmt.Sprintf("an application upload, its document and chart archives, may be at most %d bytes (%d MiB)", api.MaxUploadBytes, api.MaxUploadBytes>>20)
	if err := readJSONLimit(r, &req, maxUploadBody, limit); err != nil {
		return err
	}
	size := len(req.Document)
	for _, a := range req.Archives {
		size += len(a.Data)
	}
	if size > api.MaxUploadBytes {
		return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("%s: the upload is %d bytes; %s", req.File, size, limit)}
	}
	if err := s.barrier(r); err != nil {
		return err
	}
	up, err := s.checkUpload(req, update)
	if err != nil {
		return err
	}
	cmd, err := state.Encode(state.CmdAppUpload, time.Now(), up)
	if err != nil {
		return err
	}
	plan, err := s.cfg.Store.DryRun(cmd)
	if err != nil {
		return err
	}
	if dryRun {
		writeJSON(w, http.StatusOK, wire.AppUploadResponse{DryRun: true, Plan: plan})
		return nil
	}
	idx, err := s.commit(r.Context(), cmd)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.AppUploadResponse{Plan: plan, Index: idx})
	return nil
}

// checkUpload turns an upload into the command that stores it, or says what is
// wrong with it, field by field.
func (s *Server) checkUpload(req wire.AppUpload, update bool) (state.AppUpload, error) {
	file := req.File
	m, err := api.Decode(file, req.Document)
	if err != nil {
		return state.AppUpload{}, err
	}
	if len(m.Applications) != 1 || m.Site != nil || len(m.Hosts) > 0 {
		var held []string
		if m.Site != nil {
			held = append(held, "a Site")
		}
		if len(m.Hosts) > 0 {
			held = append(held, fmt.Sprintf("%d Host document(s)", len(m.Hosts)))
		}
		held = append(held, fmt.Sprintf("%d Application document(s)", len(m.Applications)))
		return state.AppUpload{}, api.ErrorList{{File: file, Msg: fmt.Sprintf("an application upload holds exactly one Application document; this file holds %s "+
			"(Site and Host documents are applied with `plinth-coordinator apply -f FILE`; upload each application on its own)", strings.Join(held, ", "))}}
	}
	m.Default()
	app := m.Applications[0]
	name := app.Metadata.Name
	if errs := m.Validate(file); len(errs) > 0 {
		return state.AppUpload{}, errs
	}
	var prev state.AppRecord
	var had bool
	var facts appplan.SiteFacts
	s.cfg.Store.Read(func(v state.View) {
		prev, had = v.App(name)
		facts = s.siteFacts(v)
	})
	if errs := appplan.CheckSite(file, &app, facts); len(errs) > 0 {
		return state.AppUpload{}, errs
	}
	// Archives: every one a chart names is uploaded, and no other.
	byName := map[string][]byte{}
	for _, a := range req.Archives {
		if _, dup := byName[a.Name]; dup {
			return state.AppUpload{}, &httpError{http.StatusBadRequest, fmt.Sprintf("archive %q is uploaded twice", a.Name)}
		}
		byName[a.Name] = a.Data
	}
	var errs api.ErrorList
	add := func(path, format string, args ...any) {
		errs = append(errs, api.FieldError{File: file, Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	named := map[string]bool{}
	loaded := map[string]*helmrelease.Chart{}
	for _, g := range app.Spec.Groups {
		for _, c := range g.Charts {
			path := chartPath(name, g.Name, c.Name)
			for _, p := range secretPaths(c.Values, "") {
				add(path+".values."+p, "holds a %s reference; values are stored in plain text, so a secret cannot be one: put it in a Kubernetes Secret and name the Secret in the values", secretref.Prefix)
			}
			a := c.Source.Archive
			if a == "" {
				continue
			}
			named[a] = true
			data, ok := byName[a]
			if !ok {
				add(path+".source.archive", "%q was not uploaded: `plinth-coordinator app upload -f %s` sends every archive the charts name, read next to the file", a, nonEmptyFile(file))
				continue
			}
			if len(data) > api.MaxChartArchiveBytes {
				return state.AppUpload{}, &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("%s: %s.source.archive: %s is %d bytes; a chart archive may be at most %d bytes (%d MiB)",
					file, path, a, len(data), api.MaxChartArchiveBytes, api.MaxChartArchiveBytes>>20)}
			}
			ch, ok := loaded[a]
			if !ok {
				var err error
				if ch, err = helmrelease.LoadChart(data); err != nil {
					add(path+".source.archive", "%s: %v", a, err)
					continue
				}
				loaded[a] = ch
			}
			user, err := userOverrides(prev, had, c.Name)
			if err != nil {
				return state.AppUpload{}, err
			}
			if err := renderCheck(ch, &app, c, facts, user); err != nil {
				add(path+".source.archive", "%s: %v", a, err)
			}
		}
	}
	var extra []string
	for n := range byName {
		if !named[n] {
			extra = append(extra, n)
		}
	}
	sort.Strings(extra)
	for _, n := range extra {
		add("applications["+name+"].spec", "archive %q was uploaded but no chart's source.archive names it: drop it or name it", n)
	}
	if len(errs) > 0 {
		return state.AppUpload{}, errs
	}
	up := state.AppUpload{File: file, Application: app, Update: update}
	for _, a := range req.Archives {
		up.Archives = append(up.Archives, state.Archive{Name: a.Name, Data: a.Data})
	}
	return up, nil
}

func nonEmptyFile(f string) string {
	if f == "" {
		return "FILE"
	}
	return f
}

// chartPath is a chart's field path, as validation messages name it.
func chartPath(app, group, chart string) string {
	return fmt.Sprintf("applications[%s].spec.groups[%s].charts[%s]", app, group, chart)
}

// renderCheck renders the chart offline with the values it would be installed
// with: its defaults (Helm adds them), the application's values, the system
// overrides and the operator's.
func renderCheck(ch *helmrelease.Chart, app *api.Application, c api.Chart, facts appplan.SiteFacts, user map[string]any) error {
	vals, _ := appplan.Merge(appplan.Layers(facts, app, c, user)...)
	return helmrelease.Render(helmrelease.Request{Release: c.Release, Namespace: c.Namespace, Chart: ch, Values: vals})
}

// userOverrides are the operator's stored values for a chart, nil if none.
func userOverrides(rec state.AppRecord, had bool, chart string) (map[string]any, error) {
	raw, ok := rec.Overrides[chart]
	if !had || !ok {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("application %s chart %s: stored overrides: %w", rec.Name(), chart, err)
	}
	return m, nil
}

// siteFacts is what the system overrides are generated from, as the state holds
// it (the same facts the leader applies with).
func (s *Server) siteFacts(v state.View) appplan.SiteFacts {
	return apprunner.Facts(v, func(name string, ciphertext []byte) ([]byte, error) {
		return pki.Open(s.cfg.DataKey, ciphertext, []byte(name))
	})
}

// secretPaths lists the dotted paths of values holding a secret reference.
func secretPaths(v any, prefix string) []string {
	var out []string
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if secretref.Contains(k) {
				out = append(out, join(k))
			}
			out = append(out, secretPaths(t[k], join(k))...)
		}
	case []any:
		for i, e := range t {
			out = append(out, secretPaths(e, fmt.Sprintf("%s[%d]", prefix, i))...)
		}
	case string:
		if secretref.Contains(t) {
			out = append(out, nonEmpty(prefix, "(top level)"))
		}
	}
	return out
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (s *Server) appList(w http.ResponseWriter, r *http.Request) error {
	return s.block(w, r, func(v state.View) (any, uint64) {
		apps := v.Apps()
		var idx uint64
		for _, a := range apps {
			idx = max(idx, a.ModifyIndex)
		}
		return apps, idx
	})
}

// appGet serves one application; a blocking query on an application deleted
// meanwhile answers null.
func (s *Server) appGet(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	// With ?consistent, "not found" must be the leader's answer, not a lagging
	// follower's (block's own barrier then finds this one already caught up).
	if err := s.readBarrier(r); err != nil {
		return err
	}
	if _, err := s.appRecord(name); err != nil {
		return err
	}
	return s.block(w, r, func(v state.View) (any, uint64) {
		rec, ok := v.App(name)
		if !ok {
			return nil, v.Index()
		}
		return rec, rec.ModifyIndex
	})
}

func (s *Server) appRecord(name string) (state.AppRecord, error) {
	var rec state.AppRecord
	var ok bool
	s.cfg.Store.Read(func(v state.View) { rec, ok = v.App(name) })
	if !ok {
		return rec, fmt.Errorf("application %q: %w (see `plinth-coordinator app list`)", name, state.ErrNotFound)
	}
	return rec, nil
}

func (s *Server) appAction(action string) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		id := identity(r)
		body := state.AppRequest{Name: r.PathValue("name"), Action: action, By: fmt.Sprintf("%s %s", id.Role, id.Name)}
		if err := s.propose(r.Context(), state.CmdAppRequest, body); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, struct{}{})
		return nil
	}
}

// appChart finds a chart of an application.
func appChart(rec state.AppRecord, chart string) (api.Chart, error) {
	var names []string
	for _, g := range rec.Application.Spec.Groups {
		for _, c := range g.Charts {
			if c.Name == chart {
				return c, nil
			}
			names = append(names, c.Name)
		}
	}
	return api.Chart{}, fmt.Errorf("application %q has no chart %q (its charts: %s): %w", rec.Name(), chart, strings.Join(names, ", "), state.ErrNotFound)
}

func (s *Server) appOverrideSet(w http.ResponseWriter, r *http.Request) error {
	name, chart := r.PathValue("name"), r.PathValue("chart")
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxOverrideBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("overrides: larger than the limit of %d bytes (1 MiB) for one chart's values", MaxOverrideBytes)}
		}
		return &httpError{http.StatusBadRequest, "overrides: " + err.Error()}
	}
	vals, err := helmrelease.ParseValues(data)
	if err != nil {
		return &httpError{http.StatusUnprocessableEntity, fmt.Sprintf("application %s chart %s: overrides: %v", name, chart, err)}
	}
	if ps := secretPaths(vals, ""); len(ps) > 0 {
		return &httpError{http.StatusUnprocessableEntity, fmt.Sprintf("application %s chart %s: overrides: %s holds a %s reference; overrides are stored in plain text, so a secret cannot be one: put it in a Kubernetes Secret and name the Secret in the values",
			name, chart, strings.Join(ps, ", "), secretref.Prefix)}
	}
	rec, err := s.appRecord(name)
	if err != nil {
		return err
	}
	c, err := appChart(rec, chart)
	if err != nil {
		return err
	}
	// The chart must still render with them: refused now, not at apply.
	if ch, err := s.storedChart(rec, c); err != nil {
		return err
	} else if ch != nil {
		var facts appplan.SiteFacts
		s.cfg.Store.Read(func(v state.View) { facts = s.siteFacts(v) })
		if err := renderCheck(ch, &rec.Application, c, facts, vals); err != nil {
			return &httpError{http.StatusUnprocessableEntity, fmt.Sprintf("application %s chart %s: with these overrides: %v", name, chart, err)}
		}
	}
	raw, err := json.Marshal(vals)
	if err != nil {
		return err
	}
	if err := s.propose(r.Context(), state.CmdAppOverride, state.AppOverride{Name: name, Chart: chart, Values: raw}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

func (s *Server) appOverrideClear(w http.ResponseWriter, r *http.Request) error {
	body := state.AppOverride{Name: r.PathValue("name"), Chart: r.PathValue("chart")}
	if err := s.propose(r.Context(), state.CmdAppOverride, body); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

// storedChart loads a chart's archive from the state; nil for oci and repo sources.
func (s *Server) storedChart(rec state.AppRecord, c api.Chart) (*helmrelease.Chart, error) {
	if c.Source.Archive == "" {
		return nil, nil
	}
	digest := rec.Archives[c.Source.Archive]
	var ar state.ArchiveRecord
	var ok bool
	s.cfg.Store.Read(func(v state.View) { ar, ok = v.Archive(digest) })
	if !ok {
		return nil, fmt.Errorf("application %s chart %s: archive %s (%s) is missing from the state; upload the application again", rec.Name(), c.Name, c.Source.Archive, digest)
	}
	ch, err := helmrelease.LoadChart(ar.Data)
	if err != nil {
		return nil, fmt.Errorf("application %s chart %s: stored archive %s: %w", rec.Name(), c.Name, c.Source.Archive, err)
	}
	return ch, nil
}

func (s *Server) appOverridesShow(w http.ResponseWriter, r *http.Request) error {
	name, chart := r.PathValue("name"), r.PathValue("chart")
	rec, err := s.appRecord(name)
	if err != nil {
		return err
	}
	c, err := appChart(rec, chart)
	if err != nil {
		return err
	}
	out := wire.AppOverrides{App: name, Chart: chart}
	var defaults map[string]any
	ch, err := s.storedChart(rec, c)
	switch {
	case err != nil:
		return err
	case ch != nil:
		defaults = ch.Defaults()
	default:
		out.Note = fmt.Sprintf("chart defaults are not shown: the chart comes from %s and is fetched at apply", sourceName(c.Source))
	}
	user, err := userOverrides(rec, true, chart)
	if err != nil {
		return err
	}
	var facts appplan.SiteFacts
	s.cfg.Store.Read(func(v state.View) { facts = s.siteFacts(v) })
	out.Values, out.Origins = appplan.Merge(append([]appplan.Layer{{Origin: appplan.OriginChart, Values: defaults}},
		appplan.Layers(facts, &rec.Application, c, user)...)...)
	writeJSON(w, http.StatusOK, out)
	return nil
}

func sourceName(s api.ChartSource) string {
	if s.OCI != "" {
		return s.OCI
	}
	return "repository " + s.Repo
}

// errNoCluster says the site has no cluster to read Helm records from yet.
func errNoCluster(what string, err error) error {
	return &httpError{http.StatusConflict, fmt.Sprintf("%s: the site has no cluster yet: %v; Helm history exists once kube.init has succeeded and the application was applied", what, err)}
}

func (s *Server) appHistory(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	rec, err := s.appRecord(name)
	if err != nil {
		return err
	}
	only := r.URL.Query().Get("chart")
	if only != "" {
		if _, err := appChart(rec, only); err != nil {
			return err
		}
	}
	kc, _, err := s.adminKubeconfig()
	if errors.Is(err, state.ErrNotFound) {
		return errNoCluster("application "+name+" history", err)
	}
	if err != nil {
		return err
	}
	d, err := helmrelease.New(kc, s.log)
	if err != nil {
		return fmt.Errorf("application %s history: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	out := wire.AppHistory{App: name, Charts: []wire.ChartHistory{}}
	for _, g := range rec.Application.Spec.Groups {
		for _, c := range g.Charts {
			if only != "" && c.Name != only {
				continue
			}
			ch := wire.ChartHistory{Chart: c.Name, Release: c.Release, Namespace: c.Namespace, Revisions: []wire.Revision{}}
			hs, err := d.History(ctx, c.Release, c.Namespace)
			if err != nil {
				ch.Error = err.Error()
			}
			for _, h := range hs {
				ch.Revisions = append(ch.Revisions, wire.Revision{Revision: h.Revision, State: h.State, Chart: h.Chart, Description: h.Description, Updated: h.Updated})
			}
			out.Charts = append(out.Charts, ch)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
