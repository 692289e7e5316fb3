package state

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// applier carries one command's context: the tables, its log index and its time.
type applier struct {
	t   *tables
	idx uint64
	now time.Time
	// What the command changed, for waking blocking queries: the hosts whose record
	// or steps changed (markWatch), and whether any secret did.
	touched map[string]bool
	secrets bool
	// stepHosts are the hosts a step of which this command wrote (stepWritten): refresh
	// and markWatch read them instead of walking every step of the site per command.
	stepHosts map[string]bool
	// hostsWritten are the hosts whose record this command wrote (hostWritten), for
	// the same two readers: neither walks every host per command.
	hostsWritten map[string]bool
}

// stepsChanged notes that a step of host was written, removed or moved away:
// refresh and markWatch read stepHosts instead of walking every step per command.
func (a *applier) stepsChanged(host string) {
	if a.stepHosts == nil {
		a.stepHosts = map[string]bool{}
	}
	a.stepHosts[host] = true
}

// hostWritten stamps h with this command's index; every write of a host record
// goes through it, so hostsWritten is complete.
func (a *applier) hostWritten(name string, h *HostRecord) {
	h.ModifyIndex = a.idx
	if a.hostsWritten == nil {
		a.hostsWritten = map[string]bool{}
	}
	a.hostsWritten[name] = true
}

// stepWritten stamps r with this command's index; every write of a step record goes
// through it, so stepHosts is complete.
func (a *applier) stepWritten(r *plan.Record) {
	r.ModifyIndex = a.idx
	a.stepsChanged(r.Host)
}

// writeStep replaces the record with r's ID by r, stamped (stepWritten), and moves
// it through its host's tally and the state counts. Every write of one step record
// outside a replan (which rebuilds both) goes through it.
func (a *applier) writeStep(r plan.Record) {
	a.stepWritten(&r)
	if old, ok := a.t.Steps[r.ID]; ok {
		a.t.uncount(&old)
		if was, is := old.State == plan.Succeeded, r.State == plan.Succeeded; a.t.unmet != nil && was != is {
			for _, d := range a.t.dependents[r.ID] {
				if is {
					a.t.unmet[d]--
				} else {
					a.t.unmet[d]++
				}
			}
		}
	}
	a.t.Steps[r.ID] = r
	a.t.count(&r)
	a.t.logWrite(&r)
}

// EnrolError is the FSM's refusal of an enrolment; Reason is stable for callers.
type EnrolError struct {
	Reason string
	Msg    string
}

func (e *EnrolError) Error() string { return e.Msg }

func (a *applier) event(typ, object, reason, msg string) {
	a.t.NextEventID++
	a.t.Events = append(a.t.Events, Event{ID: a.t.NextEventID, Time: a.now, Type: typ, Object: object, Reason: reason, Message: msg})
	// Trimmed in place, and only eventSlack events past the bound: a trim per
	// event copied the whole ring into a new slice on every command.
	if over := len(a.t.Events) - MaxEvents; over > eventSlack {
		n := copy(a.t.Events, a.t.Events[over:])
		clear(a.t.Events[n:])
		a.t.Events = a.t.Events[:n]
	}
}

func (a *applier) applyManifest(b ApplyManifest) error {
	if b.Base != 0 && a.t.DeclaredIndex > b.Base {
		return fmt.Errorf("%w (at index %d, after index %d that this apply was computed on): apply the file again", ErrDeclarationsMoved, a.t.DeclaredIndex, b.Base)
	}
	m := b.Manifest
	m.Default()
	site := a.t.Site
	newSite, all := View{a.t}.Merged(&m)
	if errs := api.ValidateSet(b.File, newSite, all); len(errs) > 0 {
		return errs
	}
	// What the apply changes. A host whose declaration, and the site, stay as they
	// are keeps its facts verdict: it was computed on them, so no member decodes
	// every host's facts for a change to one.
	var siteHash string
	siteChanged := false
	if m.Site != nil {
		siteHash = api.SpecHash(m.Site.Spec)
		siteChanged = !site.declares(m.Site, siteHash)
	}
	hashes := make([]string, len(m.Hosts))
	re := recheck{all: siteChanged}
	for i, h := range m.Hosts {
		hashes[i] = api.SpecHash(h.Spec)
		if !siteChanged && !a.t.Hosts[h.Metadata.Name].declares(h, hashes[i]) {
			re.hosts = append(re.hosts, h.Metadata.Name)
		}
	}
	if errs := a.factsRefusals(b.File, newSite, all, re); len(errs) > 0 {
		return errs
	}

	if m.Site != nil {
		if site == nil || site.Site.Spec.Policy.Effective().DriftCheckSeconds != m.Site.Spec.Policy.Effective().DriftCheckSeconds {
			a.t.driftChanged = a.idx
		}
		if siteChanged {
			a.t.DeclaredIndex = a.idx
			rec := &SiteRecord{Site: *m.Site, SpecHash: siteHash, File: b.File, ModifyIndex: a.idx}
			rec.Site.Metadata.Generation = 1
			if site != nil {
				rec.Site.Metadata.Generation = site.Site.Metadata.Generation + 1
				rec.Site.Status = site.Site.Status
			}
			rec.Site.Status.ObservedGeneration = rec.Site.Metadata.Generation
			a.t.Site = rec
			a.event(EventNormal, "site/"+m.Site.Metadata.Name, "SpecChanged", fmt.Sprintf("site %s generation %d applied from %s", m.Site.Metadata.Name, rec.Site.Metadata.Generation, nonEmpty(b.File, "the API")))
		}
	}
	for i, h := range m.Hosts {
		name := h.Metadata.Name
		hash := hashes[i]
		rec, ok := a.t.Hosts[name]
		if !ok {
			rec = &HostRecord{Name: name}
			a.t.Hosts[name] = rec
		}
		if rec.declares(h, hash) {
			continue
		}
		a.t.DeclaredIndex = a.idx
		status := rec.Host.Status
		gen := rec.Host.Metadata.Generation + 1
		rec.Host = h
		rec.Host.Metadata.Generation = gen
		rec.Host.Status = status
		rec.Declared = true
		rec.SpecHash = hash
		a.hostWritten(name, rec)
		a.event(EventNormal, "host/"+name, "SpecChanged", fmt.Sprintf("host %s generation %d applied", name, gen))
	}
	a.t.Invalid = ""
	switch {
	case re.all:
		a.checkFacts()
	case len(re.hosts) > 0:
		a.checkFacts(re.hosts...)
	}
	return a.replan()
}

func (a *applier) deleteHost(b DeleteHost) error {
	rec, ok := a.t.Hosts[b.Name]
	if !ok {
		return fmt.Errorf("host %q: %w", b.Name, ErrNotFound)
	}
	if a.t.Site != nil {
		for _, c := range a.t.Site.Site.Spec.Controllers {
			if c == b.Name {
				return fmt.Errorf("host %q is a controller of site %s: remove it from spec.controllers first", b.Name, a.t.Site.Site.Metadata.Name)
			}
		}
		if a.t.Site.Site.Spec.Witness == b.Name {
			return fmt.Errorf("host %q is the witness of site %s: remove it from spec.witness first", b.Name, a.t.Site.Site.Metadata.Name)
		}
	}
	delete(a.t.Hosts, b.Name)
	a.t.DeclaredIndex = a.idx
	a.t.watch[b.Name] = a.idx
	msg := "host " + b.Name + " removed from the site"
	// Its agent's certificates stop working at once on every coordinator, and the
	// gossip key it knows is rotated away (the leader does it: keys are random).
	var revoked []string
	for serial, id := range a.t.Identities {
		if id.Name == b.Name && id.Role == "agent" && id.Revoked == "" {
			id.Revoked = "host " + b.Name + " was deleted"
			revoked = append(revoked, serial)
		}
	}
	if rec.Enrolled || len(revoked) > 0 {
		a.t.GossipRekey = a.idx
	}
	if len(revoked) > 0 {
		sort.Strings(revoked)
		msg += "; certificate(s) " + strings.Join(revoked, ", ") + " revoked and the gossip key is being rotated"
	}
	a.event(EventNormal, "host/"+b.Name, "Deleted", msg)
	return a.replan()
}

func (a *applier) confirmIdentity(b ConfirmIdentity) error {
	id, ok := a.t.Identities[b.Serial]
	if !ok {
		return fmt.Errorf("confirm: certificate %s: %w", b.Serial, ErrNotFound)
	}
	if id.Revoked != "" {
		return fmt.Errorf("confirm: certificate %s is revoked: %s", b.Serial, id.Revoked)
	}
	old, ok := a.t.Identities[id.Supersedes]
	if !ok || old.Revoked != "" {
		return nil // already confirmed, or the old one expired and was forgotten
	}
	old.Revoked = "superseded by certificate " + b.Serial
	a.event(EventNormal, "host/"+id.Name, "CertificateSuperseded", fmt.Sprintf("%s %s uses certificate %s; the certificate it renewed, %s, is revoked", id.Role, id.Name, b.Serial, old.Serial))
	return nil
}

func (a *applier) setGossipKeys(b SetGossipKeys) error {
	if b.Primary == nil {
		return fmt.Errorf("gossip keys: a primary key is required")
	}
	keys := map[string]*SecretRecord{GossipKeySecret: b.Primary, GossipNextKeySecret: b.Next, GossipPrevKeySecret: b.Previous}
	for name, rec := range keys {
		if rec != nil && rec.Name != name {
			return fmt.Errorf("gossip keys: record %q given as %q", rec.Name, name)
		}
	}
	for name, rec := range keys {
		a.secrets = true
		if rec == nil {
			delete(a.t.Secrets, name)
			continue
		}
		sec := *rec
		sec.Index = a.idx
		a.t.Secrets[name] = &sec
	}
	return nil
}

// replan renders steps from the declared state and merges them with progress.
func (a *applier) replan() error {
	var site *api.Site
	if a.t.Site != nil {
		s := a.t.Site.Site
		site = &s
	}
	var hosts []api.Host
	for _, h := range a.t.Hosts {
		if h.Declared {
			hosts = append(hosts, h.Host)
		}
	}
	desired, allocs, err := plan.RenderAllocated(site, hosts, a.t.Allocations)
	if err != nil {
		return err
	}
	a.recordAllocations(allocs)
	next, changed := plan.Reconcile(desired, a.t.Steps)
	if held := plan.Hold(next, a.held()); len(held) > 0 {
		changed = slices.Compact(slices.Sorted(slices.Values(append(changed, held...))))
	}
	for _, id := range changed {
		r, ok := next[id]
		old, had := a.t.Steps[id]
		switch {
		case ok && had && old.Host != r.Host:
			a.t.stepSet[old.Host], a.t.stepSet[r.Host] = a.idx, a.idx
			a.stepsChanged(old.Host)
		case ok && !had:
			a.t.stepSet[r.Host] = a.idx
		case !ok && had:
			a.t.stepSet[old.Host] = a.idx
		}
		switch {
		case !ok:
			if had {
				a.stepsChanged(old.Host)
			}
			a.event(EventNormal, "step/"+id, "StepRemoved", "step "+id+" is no longer needed")
		case !had:
			a.event(EventNormal, "step/"+id, "StepPlanned", fmt.Sprintf("step %s planned (%s)", id, r.State))
		case old.InputsHash != r.InputsHash:
			a.event(EventNormal, "step/"+id, "InputsChanged", fmt.Sprintf("step %s inputs changed %s -> %s: it will run again", id, old.InputsHash, r.InputsHash))
		}
		if ok {
			a.stepWritten(&r)
			next[id] = r
		}
	}
	a.t.Steps = next
	a.t.dependents, a.t.unmet = nil, nil
	a.t.indexHostSteps()
	return nil
}

// recordAllocations keeps the planner's pool allocations, with an event for each
// address given or taken back.
func (a *applier) recordAllocations(allocs []plan.Allocation) {
	old := map[plan.Allocation]bool{}
	for _, al := range a.t.Allocations {
		old[al] = true
	}
	for _, al := range allocs {
		if !old[al] {
			a.event(EventNormal, "host/"+al.Host, "AddressAllocated", fmt.Sprintf("host %s got %s from the pool of network %s", al.Host, al.Address, al.Network))
		}
		delete(old, al)
	}
	for _, al := range a.t.Allocations {
		if old[al] {
			a.event(EventNormal, "host/"+al.Host, "AddressReleased", fmt.Sprintf("host %s gave %s back to the pool of network %s", al.Host, al.Address, al.Network))
		}
	}
	a.t.Allocations = allocs
}

func (a *applier) createToken(b CreateToken) error {
	if b.Token.ID == "" || b.Token.SecretHash == "" {
		return errors.New("token: id and secret hash are required")
	}
	if _, dup := a.t.Tokens[b.Token.ID]; dup {
		return fmt.Errorf("token %s already exists", b.Token.ID)
	}
	tok := b.Token
	tok.CreatedAt = a.now
	a.t.Tokens[tok.ID] = &tok
	a.event(EventNormal, "token/"+tok.ID, "TokenCreated", fmt.Sprintf("join token for %s %s, expires %s", tok.Role, tok.Name, tok.Expires.UTC().Format(time.RFC3339)))
	// Tokens that expired long ago are dropped here, deterministically (command
	// time), at most once per tokenPruneEvery: a scan on every create made creating
	// tokens quadratic in their number.
	if a.now.Sub(a.t.TokensPruned) >= tokenPruneEvery {
		a.t.TokensPruned = a.now
		for id, t := range a.t.Tokens {
			if a.now.Sub(t.Expires) > tokenKeepExpired {
				delete(a.t.Tokens, id)
			}
		}
	}
	return nil
}

// An expired token is kept this long (so `token list` can say why an enrolment
// failed), then dropped by a create at most tokenPruneEvery later.
const (
	tokenKeepExpired = 7 * 24 * time.Hour
	tokenPruneEvery  = time.Hour
)

func (a *applier) enroll(b Enroll) error {
	refuse := func(reason, msg string) error {
		a.event(EventWarning, "token/"+b.TokenID, reason, fmt.Sprintf("enrolment of %s %s refused: %s", b.Role, b.Name, msg))
		return &EnrolError{Reason: reason, Msg: msg}
	}
	tok, ok := a.t.Tokens[b.TokenID]
	switch {
	case !ok:
		return refuse("UnknownToken", "token is not known to this site (forged, or for another site)")
	case tok.SecretHash != b.SecretHash:
		return refuse("BadSecret", "token secret does not match (forged or corrupted token)")
	case !tok.UsedAt.IsZero():
		return refuse("TokenUsed", fmt.Sprintf("token was already used at %s: tokens are single-use; create a new one with `plinth-coordinator node enroll %s`", tok.UsedAt.UTC().Format(time.RFC3339), tok.Name))
	case !a.now.Before(tok.Expires):
		return refuse("TokenExpired", fmt.Sprintf("token expired at %s; create a new one with `plinth-coordinator node enroll %s`", tok.Expires.UTC().Format(time.RFC3339), tok.Name))
	case tok.Name != b.Name:
		return refuse("WrongHost", fmt.Sprintf("token is bound to %q, but %q presented it", tok.Name, b.Name))
	case tok.Role != b.Role:
		return refuse("WrongRole", fmt.Sprintf("token is for role %q, not %q", tok.Role, b.Role))
	}
	tok.UsedAt = a.now
	a.t.addIdentity(&IdentityRecord{Serial: b.Serial, Name: b.Name, Role: b.Role, NotAfter: b.NotAfter, IssuedAt: a.now})
	if b.Role == "agent" {
		rec, ok := a.t.Hosts[b.Name]
		if !ok {
			rec = &HostRecord{Name: b.Name}
			a.t.Hosts[b.Name] = rec
		}
		rec.Enrolled = true
		rec.Reachable = api.ConditionUnknown
		a.hostWritten(b.Name, rec)
	}
	a.event(EventNormal, "host/"+b.Name, "Enrolled", fmt.Sprintf("%s %s enrolled from %s; certificate %s valid until %s", b.Role, b.Name, nonEmpty(b.Remote, "unknown address"), b.Serial, b.NotAfter.UTC().Format(time.RFC3339)))
	return nil
}

func (a *applier) renewIdentity(b RenewIdentity) error {
	old, ok := a.t.Identities[b.OldSerial]
	if !ok || old.Name != b.Name || old.Role != b.Role {
		return fmt.Errorf("renew: certificate %s is not a known %s identity of %s", b.OldSerial, b.Role, b.Name)
	}
	if old.Revoked != "" {
		return &EnrolError{Reason: "Revoked", Msg: fmt.Sprintf("renew: certificate %s is revoked: %s", b.OldSerial, old.Revoked)}
	}
	// Renewing again before the first renewal was confirmed: the holder never used
	// that certificate (it lost it in a crash), so nobody may.
	if prev, ok := a.t.Identities[old.Replaced]; ok && old.Replaced != b.Serial && prev.Revoked == "" {
		prev.Revoked = "never confirmed: certificate " + b.OldSerial + " was renewed again as " + b.Serial
	}
	old.Replaced = b.Serial
	a.t.addIdentity(&IdentityRecord{Serial: b.Serial, Name: b.Name, Role: b.Role, NotAfter: b.NotAfter, IssuedAt: a.now, Supersedes: b.OldSerial})
	// Forget identities that expired: they can no longer authenticate anyway.
	for serial, id := range a.t.Identities {
		if a.now.After(id.NotAfter) {
			delete(a.t.Identities, serial)
			a.t.idsByName = nil
		}
	}
	return nil
}

func (a *applier) host(name string) (*HostRecord, error) {
	h, ok := a.t.Hosts[name]
	if !ok {
		return nil, fmt.Errorf("host %q: %w", name, ErrNotFound)
	}
	return h, nil
}

func (a *applier) reportFacts(b ReportFacts) error {
	h, err := a.host(b.Host)
	if err != nil {
		return err
	}
	if h.FactsHash == b.Hash {
		return nil
	}
	h.Facts, h.FactsHash, h.FactsAt = b.Facts, b.Hash, a.now
	a.hostWritten(b.Host, h)
	h.KubeCerts = nil
	var decoded map[string]hostspec.Facts
	if f, ok := hostFacts(h); ok {
		h.KubeCerts = f.KubeCertificates
		decoded = map[string]hostspec.Facts{b.Host: f}
	}
	if a.checkFactsWith(decoded, b.Host) {
		// Hold changes records in place, any of the site's: they are
		// stamped here and the tallies rebuilt (Hold walked every step anyway).
		for _, id := range plan.Hold(a.t.Steps, a.held()) {
			r := a.t.Steps[id]
			a.stepWritten(&r)
			a.t.Steps[id] = r
		}
		a.t.indexHostSteps()
	}
	return nil
}

func (a *applier) step(id, host string) (plan.Record, error) {
	r, ok := a.t.Steps[id]
	if !ok {
		return r, fmt.Errorf("step %q: %w", id, ErrNotFound)
	}
	if host != "" && r.Host != host {
		return r, fmt.Errorf("step %q belongs to host %s, not %s", id, r.Host, host)
	}
	return r, nil
}

func (a *applier) policy() plan.Policy {
	if a.t.Site == nil {
		return plan.PolicyFrom(api.Policy{})
	}
	return plan.PolicyFrom(a.t.Site.Site.Spec.Policy)
}

func (a *applier) putStep(r plan.Record) {
	a.writeStep(r)
	if a.t.dependents == nil {
		a.t.dependents, a.t.unmet = plan.Dependents(a.t.Steps), plan.Unmet(a.t.Steps)
	}
	// Only r and what depends on it can move: every command leaves all gated.
	ids := append([]string{r.ID}, a.t.dependents[r.ID]...)
	for _, s := range plan.RegateSome(a.t.Steps, ids, a.t.unmet) {
		a.writeStep(s)
	}
}

func (a *applier) stepStart(b StepStart) error {
	r, err := a.step(b.ID, b.Host)
	if err != nil {
		return err
	}
	if r.State == plan.Running && r.InputsHash == b.InputsHash && r.RunID == b.RunID {
		return nil
	}
	r, err = plan.Start(r, b.InputsHash, b.RunID, a.now)
	if err != nil {
		return err
	}
	r.StartedAt = a.now.Add(-max(b.Took, 0))
	a.putStep(r)
	return nil
}

func (a *applier) stepResult(b StepResult) error {
	r, err := a.step(b.ID, b.Host)
	if err != nil {
		return err
	}
	before := r.State
	if b.Unstarted {
		r, err = plan.Ran(r, b.InputsHash, b.RunID, b.Result, b.Took, a.now, a.policy())
	} else {
		r, err = plan.Finish(r, b.InputsHash, b.RunID, b.Result, a.now, a.policy())
	}
	if err != nil {
		return err
	}
	if r.State == plan.Succeeded {
		for _, o := range b.Outputs {
			o := o
			o.Index = a.idx
			a.t.Secrets[o.Name] = &o
			a.secrets = true
		}
	}
	if before == r.State && r.State == plan.Succeeded {
		return nil
	}
	a.putStep(r)
	switch r.State {
	case plan.Succeeded:
		msg := "no changes needed"
		if len(b.Result.Changes) > 0 {
			msg = strings.Join(b.Result.Changes, "; ")
		}
		a.event(EventNormal, "step/"+r.ID, "StepSucceeded", fmt.Sprintf("host %s step %s succeeded: %s", r.Host, r.Kind, msg))
	case plan.Failed:
		a.event(EventWarning, "step/"+r.ID, "StepFailed", fmt.Sprintf("host %s step %s failed (attempt %d, retry at %s): %s", r.Host, r.Kind, r.Attempts, r.RetryAt.UTC().Format(time.RFC3339), b.Result.Error))
	case plan.Blocked:
		a.event(EventWarning, "step/"+r.ID, "StepBlocked", fmt.Sprintf("host %s step %s blocked after %d attempt(s): %s; fix the cause, then `plinth-coordinator retry %s`", r.Host, r.Kind, r.Attempts, b.Result.Error, r.ID))
	}
	return nil
}

func (a *applier) stepDrift(b StepDrift) error {
	r, err := a.step(b.ID, b.Host)
	if err != nil {
		return err
	}
	had := len(r.Drift) > 0
	r, err = plan.Drift(r, b.InputsHash, b.Changes, a.policy())
	if err != nil {
		return err
	}
	if !had && len(r.Drift) == 0 {
		return nil
	}
	a.putStep(r)
	if len(b.Changes) > 0 {
		action := "reported (policy: report)"
		if r.State == plan.Ready {
			action = "repairing (policy: repair)"
		}
		a.event(EventWarning, "step/"+r.ID, "Drifted", fmt.Sprintf("host %s step %s drifted: %s; %s", r.Host, r.Kind, strings.Join(b.Changes, "; "), action))
	}
	return nil
}

func (a *applier) stepRetry(b StepRetry) error {
	r, err := a.step(b.ID, "")
	if err != nil {
		return err
	}
	r, err = plan.Retry(r)
	if err != nil {
		return err
	}
	a.putStep(r)
	a.event(EventNormal, "step/"+r.ID, "RetryRequested", "operator asked to retry step "+r.ID)
	return nil
}

func (a *applier) setReachable(b SetReachable) error {
	h, err := a.host(b.Host)
	if err != nil {
		return err
	}
	if h.Reachable == b.Status && h.ReachableMsg == b.Message {
		return nil
	}
	h.Reachable, h.ReachableReason, h.ReachableMsg = b.Status, b.Reason, b.Message
	a.hostWritten(b.Host, h)
	typ := EventNormal
	if b.Status != api.ConditionTrue {
		typ = EventWarning
	}
	a.event(typ, "host/"+b.Host, "Reachable"+b.Status, fmt.Sprintf("host %s reachable=%s: %s", b.Host, b.Status, b.Message))
	return nil
}

// fullRefreshEvery bounds how long (command time) an incremental refresh may leave a
// host's time-dependent conditions (certificate expiry) unrecomputed.
const fullRefreshEvery = time.Minute

// markWatch records, per host, that its record or a step of it changed at this
// index (refresh's last word: it may change host records itself).
func (a *applier) markWatch() {
	if a.secrets {
		a.t.secretsChanged = a.idx
	}
	for n := range a.hostsWritten {
		a.t.watch[n] = a.idx
		a.touched[n] = true
	}
	for n := range a.stepHosts {
		a.t.watch[n] = a.idx
		a.touched[n] = true
	}
}

// refresh recomputes host and site conditions and records Ready transitions. With
// incremental, only the hosts this command changed (their record or one of their
// steps carries this index) are recomputed, the others keep what they have, and
// every fullRefreshEvery all are: a command about one host no longer costs every
// host's conditions. Which commands may be incremental is dispatch's choice.
// A host's steps are read through its tally (tables.tallies), not walked.
func (a *applier) refresh(incremental bool) {
	var touched map[string]bool
	if !incremental || a.now.Sub(a.t.Refreshed) >= fullRefreshEvery {
		a.t.Refreshed = a.now
	} else {
		touched = map[string]bool{}
		for n := range a.hostsWritten {
			touched[n] = true
		}
		for n := range a.stepHosts {
			touched[n] = true
		}
	}
	var ids map[string][]api.CertValidity
	if touched == nil || len(touched) > 0 {
		ids = a.t.identityCerts(touched)
	}
	// Recomputed hosts in name order (the order of their events).
	var names []string
	if touched == nil {
		names = make([]string, 0, len(a.t.Hosts))
		for n := range a.t.Hosts {
			names = append(names, n)
		}
	} else {
		for n := range touched {
			if _, ok := a.t.Hosts[n]; ok {
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	// The roll-up follows the hosts' conditions; a full refresh (or the first
	// after a restore) builds it anew.
	if touched == nil || a.t.rollup == nil {
		a.t.rollup = plan.NewRollup()
		for n, h := range a.t.Hosts {
			if h.Declared {
				a.t.rollup.Set(n, h.Host.Status.Conditions)
			}
		}
	}
	changed := false
	rec := func(id string) plan.Record { return a.t.Steps[id] }
	for _, n := range names {
		h := a.t.Hosts[n]
		if !h.Declared {
			a.t.rollup.Remove(n)
			continue
		}
		prev := h.Host.Status.Conditions
		tally := a.t.tallies[n]
		if tally == nil {
			tally = &plan.StepTally{}
		}
		cs := plan.HostConditions(plan.HostView{
			Name: n, Generation: h.Host.Metadata.Generation, Enrolled: h.Enrolled,
			Reachable: h.Reachable, ReachableReason: h.ReachableReason, ReachableMsg: h.ReachableMsg,
			Invalid: h.Invalid, Tally: tally, Step: rec, Certs: ids[n], KubeCerts: h.KubeCerts,
		}, prev, a.now)
		if !conditionsEqual(prev, cs) {
			a.readyTransition("host/"+n, prev, cs)
			a.expiryTransitions("host/"+n, prev, cs)
			h.Host.Status.Conditions = cs
			h.Host.Status.ObservedGeneration = h.Host.Metadata.Generation
			a.hostWritten(n, h)
			a.t.rollup.Set(n, cs)
			changed = true
		}
	}
	// The site's roll-up reads the hosts' conditions, the site's own inputs (which no
	// incremental command changes) and the clock (certificate expiry, which a full
	// refresh catches up on): with no host's conditions changed it has nothing new.
	if a.t.Site == nil || (touched != nil && !changed) {
		return
	}
	prev := a.t.Site.Site.Status.Conditions
	cs := plan.SiteConditionsOf(a.t.Site.Site.Metadata.Generation, a.t.Invalid, a.t.Site.Site.Spec, a.t.rollup, a.t.siteCerts(), prev, a.now)
	if !conditionsEqual(prev, cs) {
		a.readyTransition("site/"+a.t.Site.Site.Metadata.Name, prev, cs)
		a.expiryTransitions("site/"+a.t.Site.Site.Metadata.Name, prev, cs)
		a.t.Site.Site.Status.Conditions = cs
		a.t.Site.Site.Status.ObservedGeneration = a.t.Site.Site.Metadata.Generation
		a.t.Site.ModifyIndex = a.idx
	}
}

func (a *applier) readyTransition(object string, prev, next []api.Condition) {
	p, n := plan.Find(prev, api.ConditionReady), plan.Find(next, api.ConditionReady)
	if n == nil || (p != nil && p.Status == n.Status && p.Reason == n.Reason) {
		return
	}
	typ := EventNormal
	if n.Status != api.ConditionTrue && n.Reason != "Reconciling" && n.Reason != "NotEnrolled" {
		typ = EventWarning
	}
	a.event(typ, object, "Ready"+n.Status, n.Message)
}

func conditionsEqual(a, b []api.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message ||
			x.ObservedGeneration != y.ObservedGeneration || !x.LastTransitionTime.Equal(y.LastTransitionTime) {
			return false
		}
	}
	return true
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
