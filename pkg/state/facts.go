package state

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// This file holds the FSM's side of the facts checks (plan.CheckFacts): an apply that
// makes a host's spec impossible against the facts it reported is refused, and facts
// that arrive later and make a stored spec impossible hold the host's steps, with the
// host's InvalidSpec condition saying why, until the manifest or the facts change.

// hostFacts decodes a host's reported facts; false when it has none (or they cannot
// be read, which checks nothing rather than guess).
func hostFacts(h *HostRecord) (hostspec.Facts, bool) {
	var f hostspec.Facts
	if h == nil || len(h.Facts) == 0 || json.Unmarshal(h.Facts, &f) != nil {
		return hostspec.Facts{}, false
	}
	return f, true
}

// factErrors checks every host of hosts that has reported facts against them; with
// only non-nil, just the hosts it names.
func (a *applier) factErrors(file string, site *api.Site, hosts []api.Host, only map[string]bool) api.ErrorList {
	var errs api.ErrorList
	for _, h := range hosts {
		if only != nil && !only[h.Metadata.Name] {
			continue
		}
		f, ok := hostFacts(a.t.Hosts[h.Metadata.Name])
		if !ok {
			continue
		}
		for _, e := range plan.CheckFacts(site, h, f) {
			e.File = file
			errs = append(errs, e)
		}
	}
	return errs
}

// declared is the stored site and declared hosts, sorted by name.
func (a *applier) declared() (*api.Site, []api.Host) {
	return View{a.t}.Merged(&api.Manifest{})
}

// recheck is which hosts' facts an apply must check again: every host when it
// changes the site, else the hosts it declares anew. The others' verdicts were
// computed on the declarations they keep.
type recheck struct {
	all   bool
	hosts []string
}

// factsRefusals is what an apply of site and hosts (the merged declarations) must be
// refused for: the facts problems it would have that the stored declarations do not
// have already. Those stay the hosts' InvalidSpec conditions and do not block applies
// that leave them as they are. Only the hosts re names are checked: the others'
// problems are the stored ones.
func (a *applier) factsRefusals(file string, site *api.Site, hosts []api.Host, re recheck) api.ErrorList {
	var only map[string]bool
	if !re.all {
		if len(re.hosts) == 0 {
			return nil
		}
		only = make(map[string]bool, len(re.hosts))
		for _, n := range re.hosts {
			only[n] = true
		}
	}
	next := a.factErrors(file, site, hosts, only)
	if len(next) == 0 {
		return nil
	}
	cur, curHosts := a.declared()
	had := map[string]bool{}
	for _, e := range a.factErrors("", cur, curHosts, only) {
		had[e.Path+"\x00"+e.Msg] = true
	}
	var out api.ErrorList
	for _, e := range next {
		if !had[e.Path+"\x00"+e.Msg] {
			out = append(out, e)
		}
	}
	return out
}

// checkFacts recomputes the facts verdict of the named hosts (all declared hosts
// when none are named), with an event for each that changed, and reports whether any
// did. A host not declared, or without facts, has none.
func (a *applier) checkFacts(names ...string) bool {
	return a.checkFactsWith(nil, names...)
}

// checkFactsWith is checkFacts with the facts of some hosts already decoded (a
// report's, which its command decoded anyway), so they are not decoded again.
func (a *applier) checkFactsWith(decoded map[string]hostspec.Facts, names ...string) bool {
	// The stored declarations, as declared() has them, without merging every host
	// for a command about one.
	var site *api.Site
	if a.t.Site != nil {
		s := a.t.Site.Site
		site = &s
	}
	if len(names) == 0 {
		for n := range a.t.Hosts {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	changed := false
	for _, n := range names {
		rec, ok := a.t.Hosts[n]
		if !ok {
			continue
		}
		verdict := ""
		if rec.Declared {
			f, ok := decoded[n]
			if !ok {
				f, ok = hostFacts(rec)
			}
			if ok {
				verdict = describe(plan.CheckFacts(site, rec.Host, f))
			}
		}
		if verdict == rec.Invalid {
			continue
		}
		changed = true
		rec.Invalid = verdict
		a.hostWritten(n, rec)
		if verdict != "" {
			a.event(EventWarning, "host/"+n, "InvalidSpec", fmt.Sprintf("host %s: its spec does not fit the facts it reported, so none of its steps is handed out until the manifest is fixed (or the facts change): %s", n, verdict))
		} else {
			a.event(EventNormal, "host/"+n, "SpecFitsFacts", fmt.Sprintf("host %s: its spec fits its facts again; its steps proceed", n))
		}
	}
	return changed
}

// held is the hosts whose steps are held, with why.
func (a *applier) held() map[string]string {
	out := map[string]string{}
	for n, h := range a.t.Hosts {
		if h.Invalid != "" {
			out[n] = "the host's spec does not fit its facts: " + h.Invalid
		}
	}
	return out
}

// describe renders a verdict: each problem's field path and message.
func describe(errs api.ErrorList) string {
	parts := make([]string, len(errs))
	for i, e := range errs {
		e.File = ""
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}
