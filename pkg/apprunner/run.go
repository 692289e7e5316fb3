package apprunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/appplan"
	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/helmrelease"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/secretref"
	"github.com/plinth-dev/plinth/pkg/state"
)

// run is one worker's request: its own copy of the status, committed whole with
// every change (the FSM keeps the last one of the current request).
type run struct {
	r    *Runner
	name string
	op   uint64
	rec  state.AppRecord

	mu     sync.Mutex
	status api.ApplicationStatus
	events []state.Event
	// committed is the status last proposed, to skip proposing an unchanged one.
	committed string
}

// Facts gathers what system overrides and gates are computed from: the effective
// site and hosts, and Ceph's monitors and fsid once ceph.health has reported them.
// unseal opens the step outputs they are kept in (monitors and fsid are not
// secret, but every step output is sealed alike); nil leaves them out.
func Facts(v state.View, unseal func(name string, ciphertext []byte) ([]byte, error)) appplan.SiteFacts {
	site, hosts := v.Merged(&api.Manifest{})
	f := appplan.SiteFacts{Site: site, Hosts: hosts}
	if site == nil || site.Spec.Ceph == nil || unseal == nil {
		return f
	}
	open := func(name string) string {
		sec, ok := v.Secret(name)
		if !ok {
			return ""
		}
		b, err := unseal(name, sec.Ciphertext)
		if err != nil {
			return ""
		}
		return string(b)
	}
	health := plan.StepID(api.CephHost(&site.Spec), cephspec.KindHealth, "")
	if m := open(secretref.OutputName(health, cephspec.OutputMonitors)); m != "" {
		f.CephMonitors = strings.Split(m, ",")
	}
	f.CephFSID = open(secretref.OutputName(health, cephspec.OutputFSID))
	return f
}

func (x *run) facts() (appplan.SiteFacts, state.AppRecord, bool) {
	var f appplan.SiteFacts
	var rec state.AppRecord
	var ok bool
	x.r.cfg.Store.Read(func(v state.View) {
		f = Facts(v, x.r.cfg.Unseal)
		rec, ok = v.App(x.name)
	})
	return f, rec, ok && rec.Op == x.op
}

// observed is what the gates are checked against, read now.
func (x *run) observed(ctx context.Context, cl *cluster) (appplan.Observed, error) {
	nodes, err := cl.nodes(ctx)
	if err != nil {
		return appplan.Observed{}, err
	}
	o := appplan.Observed{Nodes: nodes, Charts: map[string]api.ChartStatus{}}
	x.r.cfg.Store.Read(func(v state.View) {
		o.Steps = v.Steps("")
		for _, a := range v.Apps() {
			for _, c := range a.Status.Charts {
				o.Charts[a.Name()+"/"+c.Chart] = c
			}
		}
	})
	// This run's own charts as it sees them (its reports may still be in flight).
	x.mu.Lock()
	for _, c := range x.status.Charts {
		o.Charts[x.name+"/"+c.Chart] = c
	}
	x.mu.Unlock()
	return o, nil
}

// set changes the status under the lock.
func (x *run) set(fn func(st *api.ApplicationStatus)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	fn(&x.status)
}

func (x *run) chart(name string, fn func(c *api.ChartStatus)) {
	x.set(func(st *api.ApplicationStatus) {
		for i := range st.Charts {
			if st.Charts[i].Chart == name {
				fn(&st.Charts[i])
			}
		}
	})
}

// event queues an event for the next commit. object is "" for the application,
// else a chart name.
func (x *run) event(typ, chart, reason, msg string) {
	obj := "app/" + x.name
	if chart != "" {
		obj += "/" + chart
	}
	x.mu.Lock()
	x.events = append(x.events, state.Event{Type: typ, Object: obj, Reason: reason, Message: msg})
	x.mu.Unlock()
}

// commit proposes the status (and queued events) unless nothing changed.
func (x *run) commit(ctx context.Context) error {
	x.mu.Lock()
	st := x.status
	st.Charts = slices.Clone(st.Charts)
	st.Conditions = slices.Clone(st.Conditions)
	events := x.events
	b, _ := json.Marshal(st)
	if string(b) == x.committed && len(events) == 0 {
		x.mu.Unlock()
		return nil
	}
	x.events = nil
	x.mu.Unlock()
	err := x.r.cfg.Propose(ctx, state.CmdAppProgress, state.AppProgress{Name: x.name, Op: x.op, Status: st, Events: events})
	x.mu.Lock()
	defer x.mu.Unlock()
	if err != nil {
		x.events = append(events, x.events...)
		return fmt.Errorf("record progress: %w", err)
	}
	x.committed = string(b)
	return nil
}

// progress sets the progress line and commits.
func (x *run) progress(ctx context.Context, msg string) error {
	x.set(func(st *api.ApplicationStatus) { st.Progress = msg })
	return x.commit(ctx)
}

// apply runs an apply request: groups in order, each after its gates, charts in
// parallel or in sequence; the first failed chart fails the request.
func (x *run) apply(ctx context.Context) error {
	cl, err := x.r.clusterFor()
	if err != nil {
		return err
	}
	f, rec, ok := x.facts()
	if !ok {
		return &state.AppRequestError{Msg: "request superseded"}
	}
	app := rec.Application
	if err := x.waitPasswords(ctx, &app); err != nil {
		return err
	}
	objects := appplan.Objects(f, &app)
	for _, g := range app.Spec.Groups {
		if err := x.waitGates(ctx, cl, &app, g); err != nil {
			return err
		}
		if err := x.ensureObjects(ctx, cl, objects, g); err != nil {
			return err
		}
		var failed *chartError
		if err := x.group(ctx, cl, g, &failed); err != nil {
			return err
		}
		if failed != nil {
			return x.fail(ctx, failed)
		}
	}
	n := 0
	for _, g := range app.Spec.Groups {
		n += len(g.Charts)
	}
	x.set(func(st *api.ApplicationStatus) {
		st.State, st.ObservedGeneration, st.Progress = api.AppApplied, st.Generation, ""
		st.Conditions = setCondition(st.Conditions, api.Condition{Type: "Applied", Status: "True", Reason: "Applied",
			ObservedGeneration: st.Generation, Message: fmt.Sprintf("%d charts deployed (generation %d)", n, st.Generation)})
	})
	x.event(state.EventNormal, "", "ApplicationApplied", fmt.Sprintf("application %s generation %d applied: %d charts deployed", x.name, app.Metadata.Generation, n))
	return x.commit(ctx)
}

// waitPasswords waits until the leader has generated the application's passwords
// (pkg/coordinator makes them within a second of the upload).
func (x *run) waitPasswords(ctx context.Context, app *api.Application) error {
	for {
		var missing []string
		x.r.cfg.Store.Read(func(v state.View) {
			for _, p := range app.Spec.Passwords {
				if _, ok := v.Secret(appplan.PasswordSecret(app.Metadata.Name, p)); !ok {
					missing = append(missing, p)
				}
			}
		})
		if len(missing) == 0 {
			return nil
		}
		if err := x.progress(ctx, "waiting for the generated passwords "+strings.Join(missing, ", ")); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(x.r.cfg.Poll):
		}
	}
}

// waitGates waits until the group's gates are met, saying what it waits for.
func (x *run) waitGates(ctx context.Context, cl *cluster, app *api.Application, g api.ChartGroup) error {
	for {
		f, _, ok := x.facts()
		if !ok {
			return &state.AppRequestError{Msg: "request superseded"}
		}
		o, err := x.observed(ctx, cl)
		if err != nil {
			return err
		}
		wait := appplan.Wait(x.name, g, f, o)
		for _, c := range g.Charts {
			x.chart(c.Name, func(cs *api.ChartStatus) {
				if wait != "" {
					cs.State, cs.WaitingFor = api.ChartWaiting, wait
				} else if cs.State == api.ChartWaiting {
					cs.State, cs.WaitingFor = api.ChartPending, ""
				}
			})
		}
		if wait == "" {
			return nil
		}
		if err := x.progress(ctx, fmt.Sprintf("group %s: waiting for %s", g.Name, wait)); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(x.r.cfg.Poll):
		}
	}
}

// ensureObjects creates the group's namespaces and the generated objects in them
// (and the cluster-scoped ones). A Secret whose value Plinth does not have yet
// (a Ceph user not created yet) is left out; a gate on it holds charts that need it.
func (x *run) ensureObjects(ctx context.Context, cl *cluster, objects []appplan.Object, g api.ChartGroup) error {
	appNamespaces := map[string]bool{}
	for _, gg := range x.rec.Application.Spec.Groups {
		for _, c := range gg.Charts {
			appNamespaces[c.Namespace] = true
		}
	}
	nss := map[string]bool{}
	for _, c := range g.Charts {
		nss[c.Namespace] = true
	}
	for _, ns := range sortedKeys(nss) {
		if err := cl.ensureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	for _, o := range objects {
		// Objects in another chart's namespace wait for that chart's group; those
		// outside every chart namespace (the StorageClass and its Secret in
		// kube-system) are the cluster's, made with the first group.
		if o.Namespace != "" && !nss[o.Namespace] && appNamespaces[o.Namespace] {
			continue
		}
		var data map[string][]byte
		if o.Kind == "Secret" {
			data = map[string][]byte{}
			for k, v := range o.Data { // plain keys (a Ceph user's ID)
				data[k] = []byte(v)
			}
			missing := false
			for _, k := range sortedKeys(o.SecretData) {
				v, ok, err := x.r.openSecret(o.SecretData[k])
				if err != nil {
					return fmt.Errorf("generated Secret %s/%s: %w", o.Namespace, o.Name, err)
				}
				if !ok {
					missing = true
					break
				}
				data[k] = v
			}
			if missing {
				continue
			}
		}
		if err := cl.applyObject(ctx, x.name, o, data); err != nil {
			return err
		}
	}
	return nil
}

// chartError is a chart that failed: the request fails with it.
type chartError struct {
	chart api.Chart
	err   error
}

// group installs one group's charts, in order or in parallel. Errors returned are
// the run's own (a cancelled context, a progress report that did not commit); a
// failed chart is reported through failed.
func (x *run) group(ctx context.Context, cl *cluster, g api.ChartGroup, failed **chartError) error {
	if g.Sequenced {
		for _, c := range g.Charts {
			cerr, err := x.release(ctx, cl, g, c)
			if err != nil {
				return err
			}
			if cerr != nil {
				*failed = cerr
				return nil
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, x.r.cfg.Parallel)
	for _, c := range g.Charts {
		wg.Add(1)
		sem <- struct{}{}
		go func(c api.Chart) {
			defer wg.Done()
			defer func() { <-sem }()
			cerr, err := x.release(ctx, cl, g, c)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if cerr != nil && *failed == nil {
				*failed = cerr
			}
		}(c)
	}
	wg.Wait()
	return firstErr
}

// release installs or upgrades one chart's release.
func (x *run) release(ctx context.Context, cl *cluster, g api.ChartGroup, c api.Chart) (*chartError, error) {
	x.chart(c.Name, func(cs *api.ChartStatus) { cs.State, cs.WaitingFor, cs.Message = api.ChartApplying, "", "" })
	if err := x.progress(ctx, fmt.Sprintf("group %s: applying %s", g.Name, c.Name)); err != nil {
		return nil, err
	}
	f, rec, ok := x.facts()
	if !ok {
		return nil, &state.AppRequestError{Msg: "request superseded"}
	}
	ch, err := x.load(ctx, rec, c)
	if err != nil {
		return x.chartFailed(ctx, c, err)
	}
	var user map[string]any
	if raw, ok := rec.Overrides[c.Name]; ok {
		if err := json.Unmarshal(raw, &user); err != nil {
			return x.chartFailed(ctx, c, fmt.Errorf("user overrides: %w", err))
		}
	}
	values, _ := appplan.Merge(appplan.Layers(f, &rec.Application, c, user)...)
	res, err := cl.driver.Apply(ctx, helmrelease.Request{
		Release: c.Release, Namespace: c.Namespace, Chart: ch, Values: values,
		Wait:        helmrelease.Wait{For: helmrelease.WaitFor(c.Wait.For), Timeout: time.Duration(c.Wait.TimeoutSeconds) * time.Second},
		Remediation: helmrelease.Remediation(c.Remediation), Protected: c.Protected,
		Tests: c.Tests, MinReady: time.Duration(c.Wait.MinReadySeconds) * time.Second,
	})
	if len(res.Recovered) > 0 {
		x.event(state.EventWarning, c.Name, "ReleaseRecovered", fmt.Sprintf("application %s chart %s release %s/%s: %s", x.name, c.Name, c.Namespace, c.Release, strings.Join(res.Recovered, "; ")))
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return x.chartFailed(ctx, c, err)
	}
	x.chart(c.Name, func(cs *api.ChartStatus) {
		cs.State, cs.Revision, cs.Updated = api.ChartDeployed, res.Status.Revision, res.Status.Updated
		cs.ChartDigest, cs.ValuesDigest = res.Status.ChartDigest, res.Status.ValuesDigest
		cs.Message = strings.Join(res.Recovered, "; ")
	})
	if res.Changed {
		x.event(state.EventNormal, c.Name, "ChartDeployed", fmt.Sprintf("application %s chart %s: release %s/%s revision %d deployed", x.name, c.Name, c.Namespace, c.Release, res.Status.Revision))
	}
	return nil, x.commit(ctx)
}

func (x *run) chartFailed(ctx context.Context, c api.Chart, err error) (*chartError, error) {
	x.chart(c.Name, func(cs *api.ChartStatus) { cs.State, cs.Message = api.ChartFailed, err.Error() })
	return &chartError{chart: c, err: err}, x.commit(ctx)
}

// load returns a chart: an uploaded archive from the replicated state, or one
// fetched from its OCI registry or chart repository (every apply fetches again,
// so a moved tag is followed; the release's chart digest says what ran).
func (x *run) load(ctx context.Context, rec state.AppRecord, c api.Chart) (*helmrelease.Chart, error) {
	if c.Source.Archive == "" {
		s := c.Source
		data, err := helmrelease.Fetch(ctx, helmrelease.Source{OCI: s.OCI, Repo: s.Repo, Chart: s.Chart, Version: s.Version}, x.r.cfg.Fetch)
		if err != nil {
			return nil, err
		}
		return helmrelease.LoadChart(data)
	}
	var ar state.ArchiveRecord
	var ok bool
	x.r.cfg.Store.Read(func(v state.View) { ar, ok = v.Archive(rec.Archives[c.Source.Archive]) })
	if !ok {
		return nil, fmt.Errorf("archive %s is not in the state (upload the application again)", c.Source.Archive)
	}
	return helmrelease.LoadChart(ar.Data)
}

// fail ends an apply request on a failed chart: the condition and event name the
// application, chart and release, the cause, and the repair to try.
func (x *run) fail(ctx context.Context, f *chartError) error {
	c := f.chart
	msg := fmt.Sprintf("chart %s (release %s/%s) failed: %v. %s", c.Name, c.Namespace, c.Release, f.err, repair(x.name, c, f.err))
	x.set(func(st *api.ApplicationStatus) {
		st.State, st.Progress = api.AppApplyFailed, ""
		for i := range st.Charts {
			if st.Charts[i].State == api.ChartWaiting || st.Charts[i].State == api.ChartPending {
				st.Charts[i].WaitingFor = ""
			}
		}
		st.Conditions = setCondition(st.Conditions, api.Condition{Type: "Applied", Status: "False", Reason: "ChartFailed",
			ObservedGeneration: st.Generation, Message: msg})
	})
	x.event(state.EventWarning, c.Name, "ApplyFailed", "application "+x.name+": "+msg)
	return x.commit(ctx)
}

// repair says what to try after a chart failed.
func repair(app string, c api.Chart, err error) string {
	switch {
	case errors.Is(err, helmrelease.ErrRender):
		return fmt.Sprintf("Repair: fix the values (`plinth-coordinator app overrides show %s %s`, `app override set %s %s -f values.yaml`) or the chart (`app update -f FILE`), then `app apply %s`", app, c.Name, app, c.Name, app)
	case errors.Is(err, helmrelease.ErrProtected):
		return fmt.Sprintf("Repair: the release is protected and kept as it failed: inspect it (`app history %s %s`, `kubectl -n %s get all`), fix the cause, then `app apply %s`", app, c.Name, c.Namespace, app)
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "context deadline exceeded") || strings.Contains(err.Error(), "timed out"):
		return fmt.Sprintf("Repair: its resources did not become ready within %ds: look at `kubectl -n %s get pods` and events; fix or raise wait.timeoutSeconds, then `app apply %s`", c.Wait.TimeoutSeconds, c.Namespace, app)
	}
	return fmt.Sprintf("Repair: see `plinth-coordinator app history %s %s` and `kubectl -n %s get events`, fix the cause, then `app apply %s`", app, c.Name, c.Namespace, app)
}

// remove uninstalls the application's releases, last group first, then the
// objects generated for it; the application goes back to uploaded.
func (x *run) remove(ctx context.Context) error {
	cl, err := x.r.clusterFor()
	if err != nil {
		return err
	}
	app := x.rec.Application
	nss := map[string]bool{}
	for gi := len(app.Spec.Groups) - 1; gi >= 0; gi-- {
		g := app.Spec.Groups[gi]
		for ci := len(g.Charts) - 1; ci >= 0; ci-- {
			c := g.Charts[ci]
			nss[c.Namespace] = true
			x.chart(c.Name, func(cs *api.ChartStatus) { cs.State, cs.WaitingFor, cs.Message = api.ChartRemoving, "", "" })
			if err := x.progress(ctx, fmt.Sprintf("group %s: removing %s", g.Name, c.Name)); err != nil {
				return err
			}
			err := cl.driver.Uninstall(ctx, c.Release, c.Namespace, helmrelease.Wait{For: helmrelease.WaitFor(c.Wait.For), Timeout: time.Duration(c.Wait.TimeoutSeconds) * time.Second})
			if err != nil && !errors.Is(err, helmrelease.ErrNotFound) {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				msg := fmt.Sprintf("chart %s (release %s/%s) could not be uninstalled: %v. Repair: see `kubectl -n %s get all`, then `plinth-coordinator app remove %s` again", c.Name, c.Namespace, c.Release, err, c.Namespace, x.name)
				x.chart(c.Name, func(cs *api.ChartStatus) { cs.State, cs.Message = api.ChartFailed, err.Error() })
				x.set(func(st *api.ApplicationStatus) {
					st.State, st.Progress = api.AppRemoveFailed, ""
					st.Conditions = setCondition(st.Conditions, api.Condition{Type: "Applied", Status: "False", Reason: "RemoveFailed", Message: msg})
				})
				x.event(state.EventWarning, c.Name, "RemoveFailed", "application "+x.name+": "+msg)
				return x.commit(ctx)
			}
			x.chart(c.Name, func(cs *api.ChartStatus) { cs.State, cs.Revision = api.ChartRemoved, 0 })
		}
	}
	if err := cl.deleteObjects(ctx, x.name, sortedKeys(nss)); err != nil {
		return err
	}
	x.set(func(st *api.ApplicationStatus) {
		st.State, st.Progress = api.AppUploaded, ""
		st.Conditions = setCondition(st.Conditions, api.Condition{Type: "Applied", Status: "False", Reason: "Removed", Message: "releases removed; `app apply " + x.name + "` installs them again"})
	})
	x.event(state.EventNormal, "", "ApplicationRemoved", "application "+x.name+": releases removed")
	return x.commit(ctx)
}

func setCondition(cs []api.Condition, c api.Condition) []api.Condition {
	out := slices.Clone(cs)
	for i := range out {
		if out[i].Type == c.Type {
			out[i] = c
			return out
		}
	}
	return append(out, c)
}
