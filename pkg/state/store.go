// Package state is the coordinators' replicated state machine: the tables (site,
// hosts, tokens, identities, steps, secrets, events, coordinators), the typed commands
// that change them, and the blocking queries that read them.
//
// Apply is deterministic: it reads no clock and uses no randomness (time comes in the
// command, secrets arrive sealed), so every coordinator reaches the same state from
// the same log. It must never hold plaintext secrets or do I/O other than snapshots.
package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// snapshotVersion is the snapshot encoding written by this build.
const snapshotVersion = 1

// tables is the whole replicated state; it is what a snapshot holds.
type tables struct {
	Index  uint64                  `json:"index"`
	Site   *SiteRecord             `json:"site,omitempty"`
	Hosts  map[string]*HostRecord  `json:"hosts"`
	Tokens map[string]*TokenRecord `json:"tokens"`
	// TokensPruned is when expired tokens were last dropped (command time).
	TokensPruned time.Time `json:"tokensPruned,omitzero"`
	// Refreshed is when every host's conditions were last recomputed (command time).
	Refreshed    time.Time                  `json:"refreshed,omitzero"`
	Identities   map[string]*IdentityRecord `json:"identities"`
	Steps        map[string]plan.Record     `json:"steps"`
	Secrets      map[string]*SecretRecord   `json:"secrets"`
	Events       []Event                    `json:"events"`
	NextEventID  uint64                     `json:"nextEventID"`
	Coordinators map[string]*Coordinator    `json:"coordinators"`
	// Invalid is the validation verdict on the combined stored manifest, if it fails.
	Invalid string `json:"invalid,omitempty"`
	// DeclaredIndex is the index of the last command that changed what the site
	// declares (the site, a host's spec or labels, a host deleted, a restore): an
	// apply computed on an earlier state (ApplyManifest.Base) is refused after it.
	DeclaredIndex uint64 `json:"declaredIndex,omitempty"`
	// Allocations are the pool addresses the planner gave hosts (see plan.Allocate).
	Allocations []plan.Allocation `json:"allocations,omitempty"`
	// GossipRekey is the index at which deleting an enrolled host made a gossip key
	// rotation due: a primary key written before it is known to a revoked host.
	GossipRekey uint64 `json:"gossipRekey,omitempty"`
	// Apps are the uploaded Applications; Archives their chart archives by digest
	// (immutable once stored, so copies of the tables share them).
	Apps     map[string]*AppRecord     `json:"apps,omitempty"`
	Archives map[string]*ArchiveRecord `json:"archives,omitempty"`
	// Certs are the site CA's and every coordinator's certificate validity, as the
	// leader last recorded them (RecordCertificates).
	Certs plan.SiteCerts `json:"certs"`

	// watch is derived, never stored: per host, the highest index at which its
	// record or one of its steps changed or was removed — what the host's agent
	// waits on, so a command wakes only the agents it concerns. Rebuilt from the
	// records on decode (a removal before the last snapshot is forgotten: the agent
	// fetched after it).
	watch map[string]uint64
	// dependents is derived too: step ID -> the steps that depend on it, built when
	// first needed after the set of steps was replaced (a replan, a decode).
	dependents map[string][]string
	// unmet is derived with dependents (and dropped with it): per step, its
	// dependencies not succeeded (plan.Unmet), moved by writeStep.
	unmet map[string]int
	// hostSteps is derived too: host -> its step IDs, rebuilt by the FSM whenever
	// the set of steps is replaced (a replan, a decode), so reads about one host do
	// not walk every step of the site.
	hostSteps map[string][]string
	// stepSet is derived too: per host, the index at which a step of the host was
	// last added or removed, so an answer to its agent can leave out the steps it
	// already holds (View.HostStepSetIndex). stepSetFloor stands in for what is
	// not known: the index of the snapshot decoded or restored.
	stepSet      map[string]uint64
	stepSetFloor uint64
	// rollup is derived too: the declared hosts' conditions as the site's roll-up
	// counts them, updated by refresh host by host and rebuilt by a full refresh
	// (nil after a decode: the next refresh builds it).
	rollup *plan.Rollup
	// idsByName is derived too: identities by holder (identitiesByName), kept by
	// addIdentity; nil after a decode or a removal.
	idsByName map[string][]*IdentityRecord
	// tallies and stepStates are derived too: per host, its steps as its
	// conditions count them, and the site's steps by state (what metrics show),
	// rebuilt with hostSteps and moved record by record as records change
	// (writeStep), so neither a command nor a scrape walks every step of the site.
	tallies    map[string]*plan.StepTally
	stepStates map[plan.State]int
	// stepLog and refSteps are derived too (changed.go): per host, each write of
	// one of its steps in index order, and the steps whose inputs reference a
	// secret, so an answer to its agent reads only what changed since its last.
	stepLog  map[string][]stepWrite
	refSteps map[string][]string
	// secretsChanged is derived too: the highest index at which a secret was
	// written or removed (after a decode, the tables' index: removals before it
	// are not known), so those answers need not resolve secrets again.
	secretsChanged uint64
	// driftChanged is derived too: an index at or after the last at which the
	// site's drift-check period changed (after a decode, the site record's index),
	// the one site-wide value every agent's answer carries.
	driftChanged uint64
}

func newTables() *tables {
	return &tables{
		watch:        map[string]uint64{},
		stepSet:      map[string]uint64{},
		tallies:      map[string]*plan.StepTally{},
		stepStates:   map[plan.State]int{},
		stepLog:      map[string][]stepWrite{},
		refSteps:     map[string][]string{},
		Hosts:        map[string]*HostRecord{},
		Tokens:       map[string]*TokenRecord{},
		Identities:   map[string]*IdentityRecord{},
		Steps:        map[string]plan.Record{},
		Secrets:      map[string]*SecretRecord{},
		Coordinators: map[string]*Coordinator{},
		Apps:         map[string]*AppRecord{},
		Archives:     map[string]*ArchiveRecord{},
	}
}

// Store is the FSM. It implements raft.FSM and raft.BatchingFSM.
type Store struct {
	log    *slog.Logger
	mu     sync.RWMutex
	t      *tables
	notify chan struct{}
	// OnApply, if set, is called after every command with its type and duration; it
	// feeds metrics and must not block.
	OnApply func(typ string, d time.Duration, err error)

	blockCalls, blockRuns, blockIdle atomic.Uint64
	// hostNotify holds one channel per host that a BlockHost query waits on,
	// closed (and dropped) under mu by the command that changes that host.
	hostNotify map[string]chan struct{}
	hostMu     sync.Mutex // guards hostNotify's map under mu's read lock
}

// BlockStats counts blocking queries since the store was made.
type BlockStats struct {
	// Calls is how many blocking queries were made.
	Calls uint64
	// Wakeups is how often a waiting query ran again after a change, and Idle how
	// many of those runs found nothing newer than its caller had (a wake-up it did
	// not need).
	Wakeups, Idle uint64
}

// BlockStats reports the blocking-query counters.
func (s *Store) BlockStats() BlockStats {
	return BlockStats{Calls: s.blockCalls.Load(), Wakeups: s.blockRuns.Load(), Idle: s.blockIdle.Load()}
}

// New returns an empty store.
func New(log *slog.Logger) *Store {
	if log == nil {
		log = slog.Default()
	}
	return &Store{log: log, t: newTables(), notify: make(chan struct{}), hostNotify: map[string]chan struct{}{}}
}

// Apply implements raft.FSM.
func (s *Store) Apply(l *raft.Log) any {
	return s.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch implements raft.BatchingFSM: the commands raft committed together are
// decoded outside the lock, applied under one lock, and wake the blocking queries
// once — under load a batch holds dozens of commands.
func (s *Store) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	cmds := make([]Command, len(logs))
	ok := make([]bool, len(logs))
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		c, err := decodeCommand(l.Index, l.Data)
		if err != nil {
			out[i] = err
			continue
		}
		cmds[i], ok[i] = c, true
	}
	type applied struct {
		typ string
		d   time.Duration
		err error
	}
	var done []applied
	wake, all := map[string]bool{}, false
	s.mu.Lock()
	for i, l := range logs {
		if !ok[i] {
			continue
		}
		start := time.Now() // metrics only; never reaches the state
		resp, woke := s.dispatch(l.Index, cmds[i])
		if l.Index > s.t.Index {
			s.t.Index = l.Index
		}
		out[i] = resp
		if woke == nil {
			all = true
		}
		for h := range woke {
			wake[h] = true
		}
		if s.OnApply != nil {
			err, _ := resp.(error)
			done = append(done, applied{cmds[i].Type, time.Since(start), err})
		}
	}
	if !slices.Contains(ok, true) {
		s.mu.Unlock()
		return out
	}
	ch := s.notify
	s.notify = make(chan struct{})
	if all {
		wake = nil
	}
	s.wakeHosts(wake)
	s.mu.Unlock()
	close(ch)
	for _, d := range done {
		s.OnApply(d.typ, d.d, d.err)
	}
	return out
}

var _ raft.BatchingFSM = (*Store)(nil)

// ApplyCommand applies one encoded command at the given log index. It returns nil,
// a response value, or an error explaining why the command changed nothing.
func (s *Store) ApplyCommand(index uint64, data []byte) any {
	return s.ApplyBatch([]*raft.Log{{Index: index, Type: raft.LogCommand, Data: data}})[0]
}

// decodeCommand decodes one log entry's command and checks that this build
// understands its version.
func decodeCommand(index uint64, data []byte) (Command, error) {
	var c Command
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("state: undecodable command at index %d: %w", index, err)
	}
	if c.Version > CommandVersion {
		return c, fmt.Errorf("state: command %s at index %d has version %d; this coordinator understands up to %d: upgrade it", c.Type, index, c.Version, CommandVersion)
	}
	return c, nil
}

// dispatch applies c and says whose blocking queries to wake: the hosts it
// changed, or every host (nil) after a host deletion (its revocation and gossip
// rekey reach everyone), a secret, or a manifest that changed what every agent's
// answer carries. A manifest touching one host wakes that host's agent alone.
func (s *Store) dispatch(idx uint64, c Command) (any, map[string]bool) {
	a := &applier{t: s.t, idx: idx, now: c.Now, touched: map[string]bool{}}
	resp := s.dispatchTo(a, c)
	if a.secrets || c.Type == CmdDeleteHost || (c.Type == CmdApplyManifest && s.t.driftChanged == idx) {
		return resp, nil
	}
	return resp, a.touched
}

func (s *Store) dispatchTo(a *applier, c Command) any {
	idx := a.idx
	var err error
	var before *tables // the state an apply replaced, for its Plan
	switch c.Type {
	case CmdApplyManifest, CmdDeleteHost:
		// All or nothing: the command runs on a copy, kept only if all of it succeeded
		// (a replan can fail after the documents were stored). What a failed one
		// noted in a is never read: dispatchTo returns before refresh and markWatch.
		before = s.t
		a.t = cloneTables(s.t)
		if c.Type == CmdApplyManifest {
			err = decode(c, a.applyManifest)
		} else {
			err = decode(c, a.deleteHost)
		}
		if err == nil {
			s.t = a.t
		}
	case CmdCreateToken:
		err = decode(c, a.createToken)
	case CmdEnroll:
		err = decode(c, a.enroll)
	case CmdRenewIdentity:
		err = decode(c, a.renewIdentity)
	case CmdConfirmIdentity:
		err = decode(c, a.confirmIdentity)
	case CmdSetGossipKeys:
		err = decode(c, a.setGossipKeys)
	case CmdReportFacts:
		err = decode(c, a.reportFacts)
	case CmdStepStart:
		err = decode(c, a.stepStart)
	case CmdStepResult:
		err = decode(c, a.stepResult)
	case CmdStepDrift:
		err = decode(c, a.stepDrift)
	case CmdStepRetry:
		err = decode(c, a.stepRetry)
	case CmdSetReachable:
		err = decode(c, a.setReachable)
	case CmdPutSecret:
		err = decode(c, func(b PutSecret) error {
			sec := b.Secret
			sec.Index = a.idx
			a.t.Secrets[sec.Name] = &sec
			a.secrets = true
			return nil
		})
	case CmdAddCoordinator:
		err = decode(c, func(b AddCoordinator) error {
			co := b.Coordinator
			a.t.Coordinators[co.Name] = &co
			a.event(EventNormal, "coordinator/"+co.Name, "CoordinatorAdded", fmt.Sprintf("coordinator %s (raft %s, api %s, witness=%v)", co.Name, co.RaftAddr, co.APIAddr, co.Witness))
			return nil
		})
	case CmdRemoveCoordinator:
		err = decode(c, func(b RemoveCoordinator) error {
			delete(a.t.Coordinators, b.Name)
			a.event(EventNormal, "coordinator/"+b.Name, "CoordinatorRemoved", "coordinator "+b.Name+" removed")
			return nil
		})
	case CmdRecordEvent:
		err = decode(c, func(b RecordEvent) error {
			a.event(b.Event.Type, b.Event.Object, b.Event.Reason, b.Event.Message)
			return nil
		})
	case CmdRestore:
		err = decode(c, func(b Restore) error {
			t, err := decodeSnapshot(b.Snapshot)
			if err != nil {
				return err
			}
			s.t = t
			a.t = t
			a.t.stepSetFloor = a.idx
			a.t.DeclaredIndex = a.idx
			// Every step is new to the agents: their answers at an earlier index
			// must not be taken as current (wire.AgentSteps.Since).
			for _, r := range a.t.Steps {
				a.writeStep(r)
			}
			// Every secret is new too (and this wakes every agent).
			a.secrets = true
			a.event(EventWarning, "site", "StateRestored", "state replaced from an operator snapshot")
			return nil
		})
	case CmdAppUpload:
		err = decode(c, a.appUpload)
	case CmdAppRequest:
		err = decode(c, a.appRequest)
	case CmdAppProgress:
		err = decode(c, a.appProgress)
	case CmdAppOverride:
		err = decode(c, a.appOverride)
	case CmdRecordCertificates:
		err = decode(c, func(b RecordCertificates) error {
			a.t.Certs = b.Certs
			return nil
		})
	case CmdNoop:
		return nil
	default:
		// Known-unknown: a newer leader wrote it. Refuse rather than guess.
		err = fmt.Errorf("state: unknown command type %q at index %d", c.Type, idx)
	}
	if err != nil {
		return err
	}
	a.refresh(incremental[c.Type])
	a.markWatch()
	if c.Type == CmdApplyManifest {
		return Plan(Changes(View{before}, View{a.t}))
	}
	return nil
}

// Plan is the FSM's answer to an applied manifest: what it changed, in the words
// of a dry run (Changes), against the state it replaced. The leader hands it to
// the operator, so an apply needs no dry run of its own and shows exactly what
// happened even if other commands landed since it was planned.
type Plan []string

// incremental are the frequent commands about one host (or none) whose refresh
// recomputes only the hosts they changed; every other command recomputes all.
var incremental = map[string]bool{
	CmdReportFacts: true, CmdStepStart: true, CmdStepResult: true, CmdStepDrift: true,
	CmdStepRetry: true, CmdSetReachable: true, CmdCreateToken: true, CmdRecordEvent: true,
	CmdPutSecret: true, CmdEnroll: true,
}

func decode[T any](c Command, fn func(T) error) error {
	var b T
	if err := json.Unmarshal(c.Body, &b); err != nil {
		return fmt.Errorf("state: decode %s: %w", c.Type, err)
	}
	return fn(b)
}

// Snapshot implements raft.FSM. The copy is taken under the lock; writing happens later.
func (s *Store) Snapshot() (raft.FSMSnapshot, error) {
	data, err := s.Export()
	if err != nil {
		return nil, err
	}
	return snapshot(data), nil
}

// Export encodes the whole state (the same bytes a Raft snapshot holds).
func (s *Store) Export() ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	data, err := json.Marshal(struct {
		Version int     `json:"v"`
		Tables  *tables `json:"tables"`
	}{snapshotVersion, s.t})
	if err != nil {
		return nil, fmt.Errorf("state: encode snapshot: %w", err)
	}
	return data, nil
}

// Restore implements raft.FSM.
func (s *Store) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("state: read snapshot: %w", err)
	}
	t, err := decodeSnapshot(data)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.t = t
	ch := s.notify
	s.notify = make(chan struct{})
	s.wakeHosts(nil)
	s.mu.Unlock()
	close(ch)
	return nil
}

// wakeHosts wakes the BlockHost queries of hosts, or of every host if nil. The
// caller holds mu.
func (s *Store) wakeHosts(hosts map[string]bool) {
	s.hostMu.Lock()
	defer s.hostMu.Unlock()
	if hosts == nil {
		for h, ch := range s.hostNotify {
			close(ch)
			delete(s.hostNotify, h)
		}
		return
	}
	for h := range hosts {
		if ch, ok := s.hostNotify[h]; ok {
			close(ch)
			delete(s.hostNotify, h)
		}
	}
}

func decodeSnapshot(data []byte) (*tables, error) {
	var snap struct {
		Version int     `json:"v"`
		Tables  *tables `json:"tables"`
	}
	if err := json.Unmarshal(data, &snap); err != nil {
		return nil, fmt.Errorf("state: decode snapshot: %w", err)
	}
	if snap.Version > snapshotVersion || snap.Tables == nil {
		return nil, fmt.Errorf("state: snapshot version %d not understood (max %d)", snap.Version, snapshotVersion)
	}
	t := newTables()
	t.Index, t.Site, t.Events, t.NextEventID, t.Invalid = snap.Tables.Index, snap.Tables.Site, snap.Tables.Events, snap.Tables.NextEventID, snap.Tables.Invalid
	t.Allocations, t.GossipRekey, t.Certs, t.TokensPruned, t.Refreshed = snap.Tables.Allocations, snap.Tables.GossipRekey, snap.Tables.Certs, snap.Tables.TokensPruned, snap.Tables.Refreshed
	t.DeclaredIndex = snap.Tables.DeclaredIndex
	for k, v := range snap.Tables.Hosts {
		t.Hosts[k] = v
	}
	for k, v := range snap.Tables.Tokens {
		t.Tokens[k] = v
	}
	for k, v := range snap.Tables.Identities {
		t.Identities[k] = v
	}
	for k, v := range snap.Tables.Steps {
		t.Steps[k] = v
	}
	for k, v := range snap.Tables.Secrets {
		t.Secrets[k] = v
	}
	for k, v := range snap.Tables.Coordinators {
		t.Coordinators[k] = v
	}
	for k, v := range snap.Tables.Apps {
		t.Apps[k] = v
	}
	for k, v := range snap.Tables.Archives {
		t.Archives[k] = v
	}
	t.derive()
	t.stepSetFloor = t.Index
	return t, nil
}

// derive builds what the tables derive from their records: the watch index (from
// the records' indexes) and the host step index. The rest is built when first needed.
func (t *tables) derive() {
	for n, h := range t.Hosts {
		t.watch[n] = max(t.watch[n], h.ModifyIndex)
	}
	for _, r := range t.Steps {
		t.watch[r.Host] = max(t.watch[r.Host], r.ModifyIndex)
	}
	t.secretsChanged = max(t.secretsChanged, t.Index)
	for _, s := range t.Secrets {
		t.secretsChanged = max(t.secretsChanged, s.Index)
	}
	if t.Site != nil {
		t.driftChanged = max(t.driftChanged, t.Site.ModifyIndex)
	}
	t.indexHostSteps()
}

// indexHostSteps rebuilds hostSteps, the tallies and the state counts from Steps
// (under the write lock).
func (t *tables) indexHostSteps() {
	t.hostSteps = map[string][]string{}
	for id, r := range t.Steps {
		t.hostSteps[r.Host] = append(t.hostSteps[r.Host], id)
	}
	// In ID order: the order the host's conditions and answers read them in.
	for _, ids := range t.hostSteps {
		slices.Sort(ids)
	}
	t.tallies, t.stepStates = make(map[string]*plan.StepTally, len(t.hostSteps)), map[plan.State]int{}
	for _, ids := range t.hostSteps {
		for _, id := range ids { // in ID order: each lands at the end of its sets
			r := t.Steps[id]
			t.count(&r)
		}
	}
	t.indexChanges()
}

// count adds r to its host's tally and the state counts; uncount takes it out.
func (t *tables) count(r *plan.Record) {
	tl := t.tallies[r.Host]
	if tl == nil {
		tl = &plan.StepTally{}
		t.tallies[r.Host] = tl
	}
	tl.Add(r)
	t.stepStates[r.State]++
}

func (t *tables) uncount(r *plan.Record) {
	if tl := t.tallies[r.Host]; tl != nil {
		tl.Remove(r)
	}
	t.stepStates[r.State]--
}

type snapshot []byte

func (b snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(b); err != nil {
		sink.Cancel()
		return fmt.Errorf("state: write snapshot: %w", err)
	}
	return sink.Close()
}

func (snapshot) Release() {}

// ErrNotFound is returned by reads of missing objects.
var ErrNotFound = errors.New("not found")

// ErrDeclarationsMoved refuses an apply that left out documents the state declared
// as they were at its Base, when a declaration has changed since: what was left out
// may no longer be what the file says. The file is applied again whole.
var ErrDeclarationsMoved = errors.New("the site's declarations changed while this apply was under way")

// Index is the last applied log index.
func (s *Store) Index() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.t.Index
}

// Block runs query, and while the index it returns is not above minIndex, waits for
// the next change and runs it again, until ctx ends (Consul-style blocking query).
// The query runs under the read lock and must copy what it keeps.
func (s *Store) Block(ctx context.Context, minIndex uint64, query func(v View) uint64) {
	s.block(ctx, minIndex, query, func() <-chan struct{} { return s.notify })
}

// BlockHost is Block for a query about one host: it wakes only when a command
// changed that host's record or steps, a secret, or the whole site (a manifest,
// a host deletion, a restore) — not on every command, so a thousand agents
// waiting on their own steps cost nothing while others report.
func (s *Store) BlockHost(ctx context.Context, minIndex uint64, host string, query func(v View) uint64) {
	s.block(ctx, minIndex, query, func() <-chan struct{} {
		s.hostMu.Lock()
		defer s.hostMu.Unlock()
		ch, ok := s.hostNotify[host]
		if !ok {
			ch = make(chan struct{})
			s.hostNotify[host] = ch
		}
		return ch
	})
}

// block is Block and BlockHost's loop; changed, called under the read lock before
// each query, is the channel closed at the next change the query waits for.
func (s *Store) block(ctx context.Context, minIndex uint64, query func(v View) uint64, changed func() <-chan struct{}) {
	s.blockCalls.Add(1)
	for woken := false; ; woken = true {
		s.mu.RLock()
		ch := changed()
		idx := query(View{s.t})
		s.mu.RUnlock()
		if woken {
			s.blockRuns.Add(1)
		}
		if minIndex == 0 || idx > minIndex {
			return
		}
		if woken {
			s.blockIdle.Add(1)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// Read runs fn under the read lock.
func (s *Store) Read(fn func(v View)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn(View{s.t})
}

// View is read access to the tables; values it returns are copies.
type View struct{ t *tables }

// Index is the last applied index.
func (v View) Index() uint64 { return v.t.Index }

// Site returns the site record, if any.
func (v View) Site() (SiteRecord, bool) {
	if v.t.Site == nil {
		return SiteRecord{}, false
	}
	return clone(*v.t.Site), true
}

// Hosts returns all host records sorted by name.
func (v View) Hosts() []HostRecord {
	out := make([]HostRecord, 0, len(v.t.Hosts))
	for _, h := range v.t.Hosts {
		out = append(out, clone(*h))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Host returns one host record.
func (v View) Host(name string) (HostRecord, bool) {
	h, ok := v.t.Hosts[name]
	if !ok {
		return HostRecord{}, false
	}
	return clone(*h), true
}

// HostReach is the part of a host record membership compares.
type HostReach struct {
	Name, Reachable, ReachableMsg string
	Enrolled                      bool
}

// Reachability lists every host's enrolment and reachability, without copying
// whole records (the leader compares it with membership every second).
func (v View) Reachability() []HostReach {
	out := make([]HostReach, 0, len(v.t.Hosts))
	for n, h := range v.t.Hosts {
		out = append(out, HostReach{Name: n, Reachable: h.Reachable, ReachableMsg: h.ReachableMsg, Enrolled: h.Enrolled})
	}
	return out
}

// EachStepInputs calls fn with every step's ID and inputs, without copies: fn must
// neither keep nor change inputs.
func (v View) EachStepInputs(fn func(id string, inputs []byte)) {
	for id, r := range v.t.Steps {
		fn(id, r.Inputs)
	}
}

// StepCounts counts steps by state (metrics scrape it): kept by the FSM, not counted
// per call.
func (v View) StepCounts() map[plan.State]int {
	out := make(map[plan.State]int, len(v.t.stepStates))
	for st, n := range v.t.stepStates {
		if n != 0 {
			out[st] = n
		}
	}
	return out
}

// HostConditionCounts counts hosts by condition type and status, without
// copies (metrics scrape it).
func (v View) HostConditionCounts() map[[2]string]int {
	out := map[[2]string]int{}
	for _, h := range v.t.Hosts {
		for _, c := range h.Host.Status.Conditions {
			out[[2]string{c.Type, c.Status}]++
		}
	}
	return out
}

// EachHostStep calls fn with each of host's step records, in ID order and without
// a deep copy: fn must not change what the record's slices and maps hold, nor keep
// them past the read.
func (v View) EachHostStep(host string, fn func(r plan.Record)) {
	if v.t.hostSteps == nil { // a table never decoded nor replanned: no steps
		return
	}
	for _, id := range v.t.hostSteps[host] {
		if r, ok := v.t.Steps[id]; ok {
			fn(r)
		}
	}
}

// Steps returns step records, of one host if host != "", sorted by ID.
func (v View) Steps(host string) []plan.Record {
	out := []plan.Record{}
	for _, r := range v.t.Steps {
		if host == "" || r.Host == host {
			out = append(out, clone(r))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Step returns one step record.
func (v View) Step(id string) (plan.Record, bool) {
	r, ok := v.t.Steps[id]
	return clone(r), ok
}

// StepHost returns the host a step belongs to ("" if there is no such step),
// without Step's deep copy: every agent report asks it.
func (v View) StepHost(id string) string { return v.t.Steps[id].Host }

// Events returns events with ID > after, oldest first, of the newest MaxEvents.
func (v View) Events(after uint64) []Event {
	out := []Event{}
	evs := v.t.Events
	evs = evs[max(0, len(evs)-MaxEvents):]
	for _, e := range evs {
		if e.ID > after {
			out = append(out, e)
		}
	}
	return out
}

// Token returns a token record.
func (v View) Token(id string) (TokenRecord, bool) {
	t, ok := v.t.Tokens[id]
	if !ok {
		return TokenRecord{}, false
	}
	return *t, true
}

// Tokens returns all token records sorted by creation.
func (v View) Tokens() []TokenRecord {
	out := make([]TokenRecord, 0, len(v.t.Tokens))
	for _, t := range v.t.Tokens {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].CreatedAt.Before(out[j].CreatedAt) || (out[i].CreatedAt.Equal(out[j].CreatedAt) && out[i].ID < out[j].ID)
	})
	return out
}

// Identity returns an identity by certificate serial.
func (v View) Identity(serial string) (IdentityRecord, bool) {
	i, ok := v.t.Identities[serial]
	if !ok {
		return IdentityRecord{}, false
	}
	return *i, true
}

// GossipRekey is the index at which a gossip key rotation became due (0: never).
func (v View) GossipRekey() uint64 { return v.t.GossipRekey }

// Secret returns a sealed secret.
func (v View) Secret(name string) (SecretRecord, bool) {
	s, ok := v.t.Secrets[name]
	if !ok {
		return SecretRecord{}, false
	}
	return *s, true
}

// HostIndex is the ModifyIndex of host's record: cheap (no copy).
func (v View) HostIndex(name string) (uint64, bool) {
	h, ok := v.t.Hosts[name]
	if !ok {
		return 0, false
	}
	return h.ModifyIndex, true
}

// FactsHash is the hash of host's last reported facts: cheap (no copy).
func (v View) FactsHash(name string) (string, bool) {
	h, ok := v.t.Hosts[name]
	if !ok {
		return "", false
	}
	return h.FactsHash, true
}

// DriftClean reports whether step id of host has succeeded with inputsHash applied
// and holds no drift: an empty drift report about it would change nothing.
func (v View) DriftClean(id, host, inputsHash string) bool {
	r, ok := v.t.Steps[id]
	return ok && r.Host == host && r.State == plan.Succeeded && r.AppliedHash == inputsHash && len(r.Drift) == 0
}

// StepDef is a step's definition (kind, host, inputs, dependencies) without a deep
// copy: its slices and inputs belong to the state and must not be changed or kept.
func (v View) StepDef(id string) (plan.Step, bool) {
	r, ok := v.t.Steps[id]
	return r.Step, ok
}

// DriftCheckSeconds is the site's effective drift-check period (the default without a site).
func (v View) DriftCheckSeconds() int {
	if v.t.Site == nil {
		return api.DefaultDriftCheckSeconds
	}
	return v.t.Site.Site.Spec.Policy.Effective().DriftCheckSeconds
}

// HostStepSetIndex is an index at or after the last at which a step of host was
// added or removed: an agent that holds the host's steps at a later index holds
// every step there is (some perhaps changed since).
func (v View) HostStepSetIndex(host string) uint64 {
	return max(v.t.stepSet[host], v.t.stepSetFloor)
}

// HostWatch is the highest index at which host's record or one of its steps
// changed or was removed: cheap (no copy), for blocking queries about one host.
func (v View) HostWatch(host string) uint64 { return v.t.watch[host] }

// DriftIndex is an index at or after the last change of the site's drift-check
// period (DriftCheckSeconds), which every agent's answer carries.
func (v View) DriftIndex() uint64 { return v.t.driftChanged }

// SecretsIndex is the highest index at which a stored secret was written.
func (v View) SecretsIndex() uint64 {
	var idx uint64
	for _, s := range v.t.Secrets {
		idx = max(idx, s.Index)
	}
	return idx
}

// Coordinators returns the coordinator members sorted by name.
func (v View) Coordinators() []Coordinator {
	out := make([]Coordinator, 0, len(v.t.Coordinators))
	for _, c := range v.t.Coordinators {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Merged is the declared site and hosts as they would be after applying m on top
// of the stored declarations (apply is an upsert), hosts sorted by name. Both the FSM
// and the dry-run validate and plan this.
func (v View) Merged(m *api.Manifest) (*api.Site, []api.Host) {
	var site *api.Site
	if m.Site != nil {
		site = m.Site
	} else if v.t.Site != nil {
		s := v.t.Site.Site
		site = &s
	}
	hosts := map[string]api.Host{}
	for name, h := range v.t.Hosts {
		if h.Declared {
			hosts[name] = h.Host
		}
	}
	for _, h := range m.Hosts {
		hosts[h.Metadata.Name] = h
	}
	all := make([]api.Host, 0, len(hosts))
	for _, h := range hosts {
		all = append(all, h)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Metadata.Name < all[j].Metadata.Name })
	return site, all
}

// ApplyOf is the command applying manifest m (defaulted) from file: m without the
// site and hosts this state already declares as they are, which the apply would
// leave untouched, and Base set to this state's index. The log then carries what
// changed: one host of a thousand-host file, not the file. When nothing is left
// out the command is the whole file, without a Base: nothing can have moved.
func (v View) ApplyOf(file string, m *api.Manifest) ApplyManifest {
	out := ApplyManifest{File: file, Base: v.t.Index, Manifest: api.Manifest{Applications: m.Applications}}
	left := false
	if m.Site != nil {
		if v.t.Site.declares(m.Site, api.SpecHash(m.Site.Spec)) {
			left = true
		} else {
			out.Manifest.Site = m.Site
		}
	}
	for _, h := range m.Hosts {
		if v.t.Hosts[h.Metadata.Name].declares(h, api.SpecHash(h.Spec)) {
			left = true
		} else {
			out.Manifest.Hosts = append(out.Manifest.Hosts, h)
		}
	}
	if !left {
		return ApplyManifest{File: file, Manifest: *m}
	}
	return out
}

// Invalid is the validation verdict on the stored manifest ("" when valid).
func (v View) Invalid() string { return v.t.Invalid }

// Allocations returns the pool addresses given to hosts, by network then host.
func (v View) Allocations() []plan.Allocation {
	return append([]plan.Allocation(nil), v.t.Allocations...)
}

// clone is a deep copy of v (deepCopy) that a reader may keep and change.
func clone[T any](v T) T {
	var out T
	if src := reflect.ValueOf(v); src.IsValid() {
		deepCopy(reflect.ValueOf(&out).Elem(), src)
	}
	return out
}
