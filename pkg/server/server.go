// Package server is the coordinator's HTTPS API: mTLS authentication, per-identity
// authorization, Consul-style blocking reads from the replicated state, and writes
// proposed to Raft (forwarded to the leader when this coordinator is a follower).
//
// It owns the mapping from requests to commands. It must never change state except by
// proposing a command, and never return a secret to an identity that does not own it.
package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/consensus"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/state"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// Config wires a Server.
type Config struct {
	Name    string
	Store   *state.Store
	Raft    *consensus.Node
	CA      *pki.CA
	Bundle  pki.Bundle
	DataKey []byte
	Logger  *slog.Logger
	// AgentCertTTL is how long agent certificates live; agents renew at half-life.
	AgentCertTTL time.Duration
	// Gossip is this coordinator's membership, if running.
	Gossip GossipInfo
	// Metrics receives request and apply measurements; nil disables them.
	Metrics *Metrics
	// Join bounds the unauthenticated join port; zero fields take DefaultJoinLimits.
	Join JoinLimits
}

// GossipInfo tells agents how to join the membership pool.
type GossipInfo interface {
	Seeds() []string
}

// Server serves the coordinator API.
type Server struct {
	cfg    Config
	log    *slog.Logger
	fwd    *http.Client
	mux    *http.ServeMux
	joinMx *http.ServeMux
	synced atomic.Bool
	// enrolLimit bounds enrolment attempts per address: 100 at once (a rack enrolling
	// through one NAT), then 2 a second; and from all addresses (cfg.Join).
	enrolLimit *enrolLimiter
	// refused remembers secret refusals already recorded as events.
	refused sync.Map
	// resolved caches each step's inputs with their secrets filled in, keyed by
	// step ID, valid while the inputs hash and the secrets' index are unchanged:
	// an agent's answer is rebuilt whenever its host changes, and unsealing every
	// secret of every step each time made a controller with a step per node (the
	// first controller labels every node) cost O(nodes) per change.
	resolved sync.Map // step ID -> resolvedInputs
	// withheld holds, per host, the steps its last answer here withheld (their
	// secrets could not be resolved or granted): a sparse answer, which reads only
	// the steps written since, names these again.
	withheld withheldSteps
	// confirming holds the serials whose ConfirmIdentity is being proposed.
	confirming sync.Map
}

// New builds a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.AgentCertTTL == 0 {
		cfg.AgentCertTTL = 24 * time.Hour
	}
	cfg.Join = cfg.Join.withDefaults()
	clientTLS, err := cfg.Bundle.ClientTLSVerify("", pki.RequireRole(pki.RoleCoordinator))
	if err != nil {
		return nil, fmt.Errorf("server: forwarding tls: %w", err)
	}
	s := &Server{
		cfg:        cfg,
		log:        cfg.Logger,
		enrolLimit: newEnrolLimiter(500*time.Millisecond, 100).withGlobal(cfg.Join.GlobalEvery, cfg.Join.GlobalBurst),
		fwd: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig: clientTLS, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 16,
		}},
	}
	s.routes()
	return s, nil
}

// ServeAPI serves the mTLS API on ln until ctx ends.
func (s *Server) ServeAPI(ctx context.Context, ln net.Listener) error {
	tc, err := s.cfg.Bundle.ServerTLS(nil)
	if err != nil {
		return fmt.Errorf("server: api tls: %w", err)
	}
	// HTTP/2 first: an agent's blocking query and its reports share one
	// connection instead of opening one each (a TLS handshake, and buffers and
	// TLS state held for every agent of the site, each).
	tc.NextProtos = []string{"h2", "http/1.1"}
	return s.serve(ctx, "api", tls.NewListener(ln, tc), s.mux, nil)
}

// ServeJoin serves the enrolment endpoint, which accepts clients without certificates.
func (s *Server) ServeJoin(ctx context.Context, ln net.Listener) error {
	tc, err := s.cfg.Bundle.JoinServerTLS()
	if err != nil {
		return fmt.Errorf("server: join tls: %w", err)
	}
	capped := &capListener{Listener: ln, max: s.cfg.Join.MaxConns}
	return s.serve(ctx, "join", tls.NewListener(capped, tc), s.joinMx, s.cfg.Join.apply)
}

func (s *Server) serve(ctx context.Context, name string, ln net.Listener, h http.Handler, limit func(*http.Server)) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.cfg.Metrics.connAccepted(name)
			}
		},
	}
	if limit != nil {
		limit(srv)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		case <-done:
		}
	}()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Handler exposes the mTLS API handler (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.mux }

// JoinHandler exposes the enrolment handler.
func (s *Server) JoinHandler() http.Handler { return s.joinMx }

type ctxKey struct{}

// identity of the caller, set by authn.
func identity(r *http.Request) pki.Identity {
	id, _ := r.Context().Value(ctxKey{}).(pki.Identity)
	return id
}

// handle registers a route for the given roles.
func (s *Server) handle(pattern string, roles []string, h func(w http.ResponseWriter, r *http.Request) error) {
	s.route(pattern, roles, h, true)
}

// handleNode registers a route about this coordinator itself (status, health,
// metrics, membership), served even while it catches up after a restart.
func (s *Server) handleNode(pattern string, roles []string, h func(w http.ResponseWriter, r *http.Request) error) {
	s.route(pattern, roles, h, false)
}

// route authenticates and authorises the caller; with fromState, reads wait until
// this coordinator has replayed what it knows to be committed (see caughtUp).
func (s *Server) route(pattern string, roles []string, h func(w http.ResponseWriter, r *http.Request) error, fromState bool) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		growStack()
		start := time.Now()
		id, err := pki.PeerIdentity(r.TLS)
		if err != nil {
			s.writeErr(w, r, &httpError{http.StatusUnauthorized, "a client certificate from this site's CA is required: " + err.Error()})
			return
		}
		allowed := false
		for _, role := range roles {
			allowed = allowed || id.Role == role
		}
		if !allowed {
			s.writeErr(w, r, &httpError{http.StatusForbidden, fmt.Sprintf("%s %q may not call %s %s (needs role %v)", id.Role, id.Name, r.Method, r.URL.Path, roles)})
			return
		}
		if err := s.admit(r.Context(), id); err != nil {
			s.writeErr(w, r, err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, id))
		if fromState && r.Method == http.MethodGet && !s.caughtUp(r.Context()) {
			s.writeErr(w, r, &httpError{http.StatusServiceUnavailable, fmt.Sprintf("coordinator %s is still catching up with the leader; ask another coordinator", s.cfg.Name)})
			return
		}
		err = h(w, r)
		if err != nil {
			s.writeErr(w, r, err)
		}
		s.cfg.Metrics.request(pattern, statusOf(err), time.Since(start))
	})
}

// admit refuses a certificate the state revoked (its host was deleted, or a newer
// certificate of the identity was confirmed), on every coordinator: each checks its
// own replica. A renewed certificate's first request confirms it, which revokes the
// one it renewed. Certificates the identity table does not hold (the admin's and the
// first coordinator's, made at init) are judged by the CA alone.
func (s *Server) admit(ctx context.Context, id pki.Identity) error {
	var rec, old state.IdentityRecord
	var known, pending bool
	s.cfg.Store.Read(func(v state.View) {
		if rec, known = v.Identity(id.Serial); known && rec.Supersedes != "" {
			old, pending = v.Identity(rec.Supersedes)
			pending = pending && old.Revoked == ""
		}
	})
	if known && rec.Revoked != "" {
		return &httpError{http.StatusForbidden, fmt.Sprintf("certificate %s of %s %q is revoked: %s", id.Serial, id.Role, id.Name, rec.Revoked)}
	}
	if !pending {
		return nil
	}
	if _, busy := s.confirming.LoadOrStore(id.Serial, struct{}{}); busy {
		return nil
	}
	defer s.confirming.Delete(id.Serial)
	if err := s.propose(ctx, state.CmdConfirmIdentity, state.ConfirmIdentity{Serial: id.Serial}); err != nil {
		// The request goes on; the next one tries again.
		s.log.Warn("could not confirm a renewed certificate", "name", id.Name, "serial", id.Serial, "err", err)
	}
	return nil
}

var (
	admins       = []string{pki.RoleAdmin}
	readers      = []string{pki.RoleAdmin, pki.RoleCoordinator}
	agents       = []string{pki.RoleAgent}
	coordinators = []string{pki.RoleCoordinator}
	anyone       = []string{pki.RoleAdmin, pki.RoleCoordinator, pki.RoleAgent}
)

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.joinMx = http.NewServeMux()
	s.joinMx.HandleFunc("POST "+wire.PathEnroll, s.enroll)
	s.joinMx.HandleFunc("GET "+wire.PathHealthz, s.healthz)

	s.mux.HandleFunc("GET "+wire.PathHealthz, s.healthz)
	s.handleNode("GET "+wire.PathReadyz, anyone, s.readyz)
	s.handleNode("GET "+wire.PathMetrics, anyone, s.metrics)
	s.handleNode("GET "+wire.PathStatus, anyone, s.status)

	s.handle("POST "+wire.PathApply, admins, s.apply)
	// Every document kind: get, and describe and delete where its row says so.
	for _, k := range api.DocumentKinds() {
		p := wire.DocumentPath(k)
		s.handle("GET "+p, readers, s.getDocuments(k))
		if k.Describe {
			s.handle("GET "+p+"/{name}", readers, s.describeDocument(k))
		}
		if k.Delete {
			s.handle("DELETE "+p+"/{name}", admins, s.deleteDocument(k))
		}
	}
	s.handle("GET "+wire.PathSteps, readers, s.getSteps)
	s.handle("POST "+wire.PathRetry, admins, s.retry)
	s.handle("GET "+wire.PathEvents, readers, s.getEvents)
	s.handle("POST "+wire.PathTokens, admins, s.createToken)
	s.handle("GET "+wire.PathTokens, admins, s.getTokens)
	s.handleNode("GET "+wire.PathMembers, readers, s.members)
	s.handle("GET "+wire.PathSnapshot, admins, s.snapshotSave)
	s.handle("GET "+wire.PathKubeconfig, admins, s.kubeconfig)
	s.handle("POST "+wire.PathSnapshot, admins, s.snapshotRestore)
	s.handleNode("GET "+wire.PathProfile+"{name}", admins, s.profile)
	s.appRoutes()

	s.handle("GET "+wire.PathAgentSteps, agents, s.agentSteps)
	s.handle("GET "+wire.PathAgentSteps+"/{id...}", agents, s.agentStep)
	s.handle("POST "+wire.PathAgentStart, agents, s.agentStart)
	s.handle("POST "+wire.PathAgentResult, agents, s.agentResult)
	s.handle("POST "+wire.PathAgentDrift, agents, s.agentDrift)
	s.handle("POST "+wire.PathAgentFacts, agents, s.agentFacts)
	s.handle("POST "+wire.PathAgentRenew, agents, s.agentRenew)
	s.handle("GET "+wire.PathAgentConfig, agents, s.agentConfig)

	s.handle("POST "+wire.PathInternalApply, coordinators, s.internalApply)
	s.handle("POST "+wire.PathRaftJoin, coordinators, s.raftJoin)
}

// catchUpWait is how long a read waits for entries committed but not yet applied
// before it is refused: a coordinator in step with the leader (the leader itself
// too) applies them within milliseconds; one replaying a long log after a restart
// sends its readers to another coordinator instead of answering from old state.
const catchUpWait = 2 * time.Second

// caughtUp reports whether this coordinator has applied everything it knew to be
// committed when first asked since it started, so its local reads are not from
// before a restart. Once true it stays true: later lag is what ?consistent is for.
// It waits up to catchUpWait for that index rather than comparing once: Raft moves
// the commit index before it hands the entries to the FSM, so under writes a
// replica in step (the leader too) can be caught between the two.
func (s *Server) caughtUp(ctx context.Context) bool {
	if s.synced.Load() {
		return true
	}
	leader, _ := s.cfg.Raft.Leader()
	ci := s.cfg.Raft.CommitIndex()
	if leader == "" || ci == 0 {
		return false
	}
	if s.cfg.Raft.AppliedIndex() < ci {
		deadline := time.NewTimer(catchUpWait)
		defer deadline.Stop()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for s.cfg.Raft.AppliedIndex() < ci {
			select {
			case <-ctx.Done():
				return false
			case <-deadline.C:
				return false
			case <-tick.C:
			}
		}
	}
	s.synced.Store(true)
	return true
}

// httpError is an error with the status it maps to.
type httpError struct {
	Status int    `json:"status"`
	Msg    string `json:"error"`
}

func (e *httpError) Error() string { return e.Msg }

func statusOf(err error) int {
	var he *httpError
	var el api.ErrorList
	var ee *state.EnrolError
	var se *plan.StaleError
	var nl *consensus.NotLeaderError
	var ae *state.AppRequestError
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &he):
		return he.Status
	case errors.As(err, &el):
		return http.StatusUnprocessableEntity
	case errors.As(err, &ee):
		return http.StatusForbidden
	case errors.As(err, &se), errors.As(err, &ae), errors.Is(err, state.ErrDeclarationsMoved):
		return http.StatusConflict
	case errors.Is(err, state.ErrNotFound):
		return http.StatusNotFound
	case errors.As(err, &nl), errors.Is(err, errNoQuorum):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	body := wire.ErrorBody{Error: err.Error()}
	var el api.ErrorList
	if errors.As(err, &el) {
		body.Fields = el
	}
	if code >= 500 {
		s.log.Warn("request failed", "method", r.Method, "path", r.URL.Path, "status", code, "err", err)
	}
	writeJSON(w, code, body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// maxBody bounds a JSON request: a manifest at its limit, escaped, fits.
const maxBody = 2*api.MaxManifestBytes + 64<<10

// manifestLimit is what maxBody bounds, in readJSON's refusals (formatted once,
// not on every request).
var manifestLimit = fmt.Sprintf("a manifest may be at most %d bytes", api.MaxManifestBytes)

func readJSON(r *http.Request, v any) error {
	return readJSONLimit(r, v, maxBody, manifestLimit)
}

// readJSONLimit decodes a JSON body of at most limit bytes; a larger one is refused
// with 413, the limit and what it bounds (why).
func readJSONLimit(r *http.Request, v any, limit int64, why string) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body: larger than the limit of %d bytes (%s)", tooBig.Limit, why)}
		}
		return &httpError{http.StatusBadRequest, "request body: " + err.Error()}
	}
	return nil
}

// blocking parses ?index=N&wait=D. wait defaults to 5m and is capped at 10m.
func blocking(r *http.Request) (uint64, time.Duration, error) {
	q := r.URL.Query()
	var idx uint64
	if v := q.Get("index"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, &httpError{http.StatusBadRequest, "index: want a non-negative integer, got " + strconv.Quote(v)}
		}
		idx = n
	}
	wait := 5 * time.Minute
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return 0, 0, &httpError{http.StatusBadRequest, "wait: want a duration like 30s, got " + strconv.Quote(v)}
		}
		wait = d
	}
	return idx, min(wait, 10*time.Minute), nil
}

// block runs a blocking query and writes the result with its index.
func (s *Server) block(w http.ResponseWriter, r *http.Request, query func(v state.View) (any, uint64)) error {
	idx, wait, err := blocking(r)
	if err != nil {
		return err
	}
	if err := s.readBarrier(r); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	var out any
	var at uint64
	s.cfg.Store.Block(ctx, idx, func(v state.View) uint64 {
		out, at = query(v)
		return at
	})
	if at == 0 {
		at = 1
	}
	w.Header().Set("X-Plinth-Index", strconv.FormatUint(at, 10))
	writeJSON(w, http.StatusOK, out)
	return nil
}

// blockWatch is block for queries about one host whose answer is dear to build:
// the wait wakes only for changes to that host (Store.BlockHost) and follows
// watch, a cheap index of what the answer depends on; build runs once, when
// watch passed the caller's index or the wait ended. The answer's index is the
// larger of the two, so the caller never asks again for a change it has seen.
func (s *Server) blockWatch(w http.ResponseWriter, r *http.Request, host string, watch func(v state.View) uint64, build func(v state.View) (any, uint64)) error {
	idx, wait, err := blocking(r)
	if err != nil {
		return err
	}
	if err := s.readBarrier(r); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	s.cfg.Store.BlockHost(ctx, idx, host, watch)
	var out any
	var at uint64
	s.cfg.Store.Read(func(v state.View) {
		out, at = build(v)
		at = max(at, watch(v), 1)
	})
	w.Header().Set("X-Plinth-Index", strconv.FormatUint(at, 10))
	writeJSON(w, http.StatusOK, out)
	return nil
}

var errNoQuorum = errors.New("no leader")

// propose encodes a command stamped with the leader-side clock and commits it.
func (s *Server) propose(ctx context.Context, typ string, body any) error {
	_, err := s.proposeAt(ctx, typ, body)
	return err
}

// proposeAt is propose that returns the command's log index.
func (s *Server) proposeAt(ctx context.Context, typ string, body any) (uint64, error) {
	data, err := state.Encode(typ, time.Now(), body)
	if err != nil {
		return 0, err
	}
	return s.commit(ctx, data)
}

// commit applies on the leader, or forwards to it, and returns the log index.
func (s *Server) commit(ctx context.Context, data []byte) (uint64, error) {
	_, idx, err := s.commitAnswer(ctx, data)
	return idx, err
}

// commitAnswer is commit that also returns the FSM's answer: a state.Plan for a
// manifest (forwarded writes carry it back in wire.Applied), else nil.
func (s *Server) commitAnswer(ctx context.Context, data []byte) (any, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if s.cfg.Raft.IsLeader() {
		resp, idx, err := s.cfg.Raft.Apply(ctx, data)
		if err != nil && (ctx.Err() != nil || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrEnqueueTimeout)) {
			return nil, 0, fmt.Errorf("%w: write not confirmed (%v); %s", errNoQuorum, err, s.quorumHint())
		}
		return resp, idx, err
	}
	leaderID, _ := s.cfg.Raft.Leader()
	if leaderID == "" {
		return nil, 0, fmt.Errorf("%w: no coordinator is leader, so writes are refused; %s", errNoQuorum, s.quorumHint())
	}
	var addr string
	s.cfg.Store.Read(func(v state.View) {
		for _, c := range v.Coordinators() {
			if c.Name == leaderID {
				addr = c.APIAddr
			}
		}
	})
	if addr == "" {
		return nil, 0, fmt.Errorf("%w: leader %s has no known API address yet; retry", errNoQuorum, leaderID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+wire.PathInternalApply, bytes.NewReader(data))
	if err != nil {
		return nil, 0, err
	}
	resp, err := s.fwd.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: forward to leader %s at %s: %v", errNoQuorum, leaderID, addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		var ok wire.Applied
		if err := json.NewDecoder(resp.Body).Decode(&ok); err != nil {
			return nil, 0, fmt.Errorf("forwarded write: decode answer: %w", err)
		}
		if ok.Plan != nil {
			return state.Plan(ok.Plan), ok.Index, nil
		}
		return nil, ok.Index, nil
	}
	var eb wire.ErrorBody
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&eb)
	if len(eb.Fields) > 0 {
		return nil, 0, api.ErrorList(eb.Fields)
	}
	return nil, 0, &httpError{resp.StatusCode, eb.Error}
}

// readBarrier makes this coordinator's state at least as current as the leader's
// when the request asks for ?consistent: the leader runs a barrier, a follower
// commits a no-op through the leader and waits until it has applied that index.
func (s *Server) readBarrier(r *http.Request) error {
	if !r.URL.Query().Has("consistent") {
		return nil
	}
	return s.barrier(r)
}

// barrier returns once this coordinator's state holds everything committed before
// the call: the leader runs a Raft barrier, a follower commits a Noop through the
// leader and waits until it has applied it.
func (s *Server) barrier(r *http.Request) error {
	if s.cfg.Raft.IsLeader() {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		if err := s.cfg.Raft.Barrier(ctx); err != nil {
			return fmt.Errorf("%w: consistent read: leader barrier: %v; %s", errNoQuorum, err, s.quorumHint())
		}
		return nil
	}
	data, err := state.Encode(state.CmdNoop, time.Now(), struct{}{})
	if err != nil {
		return err
	}
	idx, err := s.commit(r.Context(), data)
	if err != nil {
		return fmt.Errorf("consistent read: %w", err)
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	s.cfg.Store.Block(ctx, idx-1, func(v state.View) uint64 { return v.Index() })
	if s.cfg.Store.Index() < idx {
		return fmt.Errorf("%w: consistent read: this coordinator has not caught up to index %d", errNoQuorum, idx)
	}
	return nil
}

func (s *Server) quorumHint() string {
	ms, err := s.cfg.Raft.Members()
	if err != nil {
		return "membership unknown: " + err.Error()
	}
	hint := fmt.Sprintf("%d voting coordinator(s) configured; a majority must be up", len(ms))
	if len(ms) == 2 {
		hint += "; with two controllers and no witness, losing one stops writes: if it is gone for good, fence it and run `plinth-coordinator recover --force-single` on the survivor"
	}
	return hint
}

func (s *Server) internalApply(w http.ResponseWriter, r *http.Request) error {
	data, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		return &httpError{http.StatusBadRequest, err.Error()}
	}
	if !s.cfg.Raft.IsLeader() {
		return &httpError{http.StatusServiceUnavailable, "not the leader any more; retry"}
	}
	resp, idx, err := s.commitAnswer(r.Context(), data)
	if err != nil {
		return err
	}
	out := wire.Applied{Index: idx}
	if p, ok := resp.(state.Plan); ok {
		out.Plan = p
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
