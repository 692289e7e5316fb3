package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/secretref"
	"github.com/plinth-dev/plinth/pkg/state"
	"github.com/plinth-dev/plinth/pkg/wire"
)

func (s *Server) agentSteps(w http.ResponseWriter, r *http.Request) error {
	host := identity(r).Name
	var refusals []refusal
	err := s.block(w, r, func(v state.View) (any, uint64) {
		out := wire.AgentSteps{Host: host, Steps: []wire.AgentStep{}, DriftCheckSeconds: api.DefaultDriftCheckSeconds}
		if site, ok := v.Site(); ok {
			out.DriftCheckSeconds = site.Site.Spec.Policy.Effective().DriftCheckSeconds
		}
		var idx uint64
		if h, ok := v.Host(host); ok {
			idx = h.ModifyIndex
		}
		for _, name := range []string{state.GossipKeySecret, state.GossipNextKeySecret, state.GossipPrevKeySecret} {
			if rec, ok := v.Secret(name); ok {
				out.GossipKeysVersion = max(out.GossipKeysVersion, rec.Index)
			}
		}
		idx = max(idx, out.GossipKeysVersion)
		refusals = refusals[:0]
		for _, st := range v.Steps(host) {
			idx = max(idx, st.ModifyIndex)
			inputs, err := s.resolveSecrets(v, st.Step)
			var ge *plan.GrantError
			if errors.As(err, &ge) {
				// Never handed out; the agent sees the step as waiting.
				refusals = append(refusals, refusal{ge, st.InputsHash})
				continue
			}
			if err != nil {
				// The step cannot run until its secret exists; the agent sees it as waiting.
				s.log.Warn("step inputs reference a missing secret", "step", st.ID, "err", err)
				continue
			}
			out.Steps = append(out.Steps, wire.AgentStepFrom(st, inputs))
		}
		return out, idx
	})
	for _, rf := range refusals {
		s.refuseSecret(r.Context(), rf.ge, rf.hash)
	}
	return err
}

type refusal struct {
	ge   *plan.GrantError
	hash string
}

// resolveSecrets replaces the secret references in a step's inputs with their
// values, each only if the planner granted it to this step (plan.Grant). Inputs hashes
// are taken over the references, so secrets never enter the log in the clear.
func (s *Server) resolveSecrets(v state.View, st plan.Step) (json.RawMessage, error) {
	if !bytes.Contains(st.Inputs, []byte(secretref.Prefix)) {
		return st.Inputs, nil
	}
	var doc any
	if err := json.Unmarshal(st.Inputs, &doc); err != nil {
		return nil, err
	}
	lookup := func(id string) (plan.Step, bool) {
		r, ok := v.Step(id)
		return r.Step, ok
	}
	var walk func(x any) (any, error)
	walk = func(x any) (any, error) {
		switch t := x.(type) {
		case string:
			name, ok := secretref.Parse(t)
			if !ok {
				return t, nil
			}
			if err := plan.Grant(st, name, lookup); err != nil {
				return nil, err
			}
			sec, found := v.Secret(name)
			if !found {
				return nil, fmt.Errorf("secret %q is not available yet", name)
			}
			plain, err := pki.Open(s.cfg.DataKey, sec.Ciphertext, []byte(name))
			if err != nil {
				return nil, fmt.Errorf("secret %q: %w", name, err)
			}
			return string(plain), nil
		case map[string]any:
			for k, e := range t {
				r, err := walk(e)
				if err != nil {
					return nil, err
				}
				t[k] = r
			}
		case []any:
			for i, e := range t {
				r, err := walk(e)
				if err != nil {
					return nil, err
				}
				t[i] = r
			}
		}
		return x, nil
	}
	out, err := walk(doc)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// refuseSecret logs a step's request for a secret it was not granted and records it
// as a Warning event, once per step, inputs and secret (agents ask again and again).
func (s *Server) refuseSecret(ctx context.Context, ge *plan.GrantError, inputsHash string) {
	key := ge.Step + "\x00" + inputsHash + "\x00" + ge.Secret
	if _, dup := s.refused.LoadOrStore(key, struct{}{}); dup {
		return
	}
	s.log.Warn("secret refused", "step", ge.Step, "host", ge.Host, "secret", ge.Secret, "err", ge)
	ev := state.Event{Type: state.EventWarning, Object: "host/" + ge.Host, Reason: "SecretRefused", Message: ge.Error()}
	if err := s.propose(ctx, state.CmdRecordEvent, state.RecordEvent{Event: ev}); err != nil {
		s.refused.Delete(key) // try again on the next request
		s.log.Warn("could not record the refusal event", "step", ge.Step, "err", err)
	}
}

// agentStep serves one step, only to the agent of the host it belongs to.
func (s *Server) agentStep(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var rec plan.Record
	var ok bool
	s.cfg.Store.Read(func(v state.View) { rec, ok = v.Step(id) })
	if !ok {
		return fmt.Errorf("step %q: %w", id, state.ErrNotFound)
	}
	if err := ownHost(r, rec.Host); err != nil {
		return err
	}
	var inputs json.RawMessage
	var rerr error
	s.cfg.Store.Read(func(v state.View) { inputs, rerr = s.resolveSecrets(v, rec.Step) })
	var ge *plan.GrantError
	if errors.As(rerr, &ge) {
		s.refuseSecret(r.Context(), ge, rec.InputsHash)
		return &httpError{http.StatusForbidden, rerr.Error()}
	}
	if rerr != nil {
		return &httpError{http.StatusConflict, "step " + rec.ID + ": " + rerr.Error()}
	}
	writeJSON(w, http.StatusOK, wire.AgentStepFrom(rec, inputs))
	return nil
}

func ownHost(r *http.Request, host string) error {
	if id := identity(r); id.Name != host {
		return &httpError{http.StatusForbidden, fmt.Sprintf("agent %q may only access its own host, not %q", id.Name, host)}
	}
	return nil
}

func (s *Server) stepOwner(id string) string {
	var host string
	s.cfg.Store.Read(func(v state.View) {
		if r, ok := v.Step(id); ok {
			host = r.Host
		}
	})
	return host
}

func (s *Server) agentReport(r *http.Request) (wire.StepReport, error) {
	var rep wire.StepReport
	if err := readJSON(r, &rep); err != nil {
		return rep, err
	}
	owner := s.stepOwner(rep.ID)
	if owner == "" {
		return rep, fmt.Errorf("step %q: %w", rep.ID, state.ErrNotFound)
	}
	return rep, ownHost(r, owner)
}

func (s *Server) agentStart(w http.ResponseWriter, r *http.Request) error {
	rep, err := s.agentReport(r)
	if err != nil {
		return err
	}
	if err := s.propose(r.Context(), state.CmdStepStart, state.StepStart{ID: rep.ID, Host: identity(r).Name, InputsHash: rep.InputsHash, RunID: rep.RunID}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

func (s *Server) agentResult(w http.ResponseWriter, r *http.Request) error {
	rep, err := s.agentReport(r)
	if err != nil {
		return err
	}
	if rep.Result == nil {
		return &httpError{http.StatusBadRequest, "result: required"}
	}
	cmd := state.StepResult{ID: rep.ID, Host: identity(r).Name, InputsHash: rep.InputsHash, RunID: rep.RunID, Result: *rep.Result}
	if len(cmd.Result.Outputs) > 0 {
		names := make(map[string]string, len(cmd.Result.Outputs))
		for k, v := range cmd.Result.Outputs {
			name := secretref.OutputName(rep.ID, k)
			sealed, err := pki.Seal(s.cfg.DataKey, []byte(v), []byte(name))
			if err != nil {
				return err
			}
			cmd.Outputs = append(cmd.Outputs, state.SecretRecord{Name: name, Ciphertext: sealed})
			names[k] = "sealed"
		}
		sort.Slice(cmd.Outputs, func(i, j int) bool { return cmd.Outputs[i].Name < cmd.Outputs[j].Name })
		cmd.Result.Outputs = names
	}
	if err := s.propose(r.Context(), state.CmdStepResult, cmd); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

func (s *Server) agentDrift(w http.ResponseWriter, r *http.Request) error {
	rep, err := s.agentReport(r)
	if err != nil {
		return err
	}
	if err := s.propose(r.Context(), state.CmdStepDrift, state.StepDrift{ID: rep.ID, Host: identity(r).Name, InputsHash: rep.InputsHash, Changes: rep.Changes}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

func (s *Server) agentFacts(w http.ResponseWriter, r *http.Request) error {
	var rep wire.FactsReport
	if err := readJSON(r, &rep); err != nil {
		return err
	}
	host := identity(r).Name
	var same bool
	s.cfg.Store.Read(func(v state.View) {
		h, ok := v.Host(host)
		same = ok && h.FactsHash == rep.Hash
	})
	if !same {
		if err := s.propose(r.Context(), state.CmdReportFacts, state.ReportFacts{Host: host, Facts: rep.Facts, Hash: rep.Hash}); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

func (s *Server) agentRenew(w http.ResponseWriter, r *http.Request) error {
	var req wire.RenewRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	id := identity(r)
	certPEM, cert, err := s.cfg.CA.SignCSR([]byte(req.CSR), id.Name, id.Role, s.cfg.AgentCertTTL, time.Now())
	if err != nil {
		return &httpError{http.StatusBadRequest, err.Error()}
	}
	body := state.RenewIdentity{Name: id.Name, Role: id.Role, OldSerial: id.Serial, Serial: cert.SerialNumber.Text(16), NotAfter: cert.NotAfter}
	if err := s.propose(r.Context(), state.CmdRenewIdentity, body); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.CertResponse{Cert: string(certPEM), CA: string(s.cfg.CA.CertPEM)})
	return nil
}

func (s *Server) agentConfig(w http.ResponseWriter, r *http.Request) error {
	cfg, err := s.agentConfigFor()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cfg)
	return nil
}

func (s *Server) agentConfigFor() (wire.AgentConfig, error) {
	var out wire.AgentConfig
	var sealed []state.SecretRecord
	s.cfg.Store.Read(func(v state.View) {
		for _, c := range v.Coordinators() {
			out.Coordinators = append(out.Coordinators, c.APIAddr)
			if c.GossipAddr != "" {
				out.GossipSeeds = append(out.GossipSeeds, c.GossipAddr)
			}
		}
		// The primary first, then the keys a rotation keeps installed beside it.
		for _, name := range []string{state.GossipKeySecret, state.GossipNextKeySecret, state.GossipPrevKeySecret} {
			if rec, ok := v.Secret(name); ok {
				sealed = append(sealed, rec)
			}
		}
	})
	for _, rec := range sealed {
		key, err := pki.Open(s.cfg.DataKey, rec.Ciphertext, []byte(rec.Name))
		if err != nil {
			return out, fmt.Errorf("gossip key %s: %w", rec.Name, err)
		}
		if rec.Name == state.GossipKeySecret {
			out.GossipKey = key
		}
		out.GossipKeys = append(out.GossipKeys, key)
	}
	if out.GossipKey == nil {
		out.GossipKeys = nil // not made yet: the agent waits for the primary
	}
	return out, nil
}

// CoordinatorCertTTL is the lifetime of coordinator certificates.
const CoordinatorCertTTL = 365 * 24 * time.Hour

func (s *Server) enroll(w http.ResponseWriter, r *http.Request) {
	err := s.doEnroll(w, r)
	if err != nil {
		s.log.Warn("enrolment refused", "remote", r.RemoteAddr, "err", err)
		s.writeErr(w, r, err)
	}
}

func (s *Server) doEnroll(w http.ResponseWriter, r *http.Request) error {
	if ok, global := s.enrolLimit.admit(r.RemoteAddr, time.Now()); !ok {
		if global {
			return &httpError{http.StatusTooManyRequests, "too many enrolment attempts at this coordinator from all addresses; wait a few seconds"}
		}
		return &httpError{http.StatusTooManyRequests, "too many enrolment attempts from this address; wait a few seconds"}
	}
	var req wire.EnrollRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	tok, err := pki.ParseToken(req.Token)
	if err != nil {
		s.recordRefusal(r, req.Name, "MalformedToken", err.Error())
		return &httpError{http.StatusForbidden, "enrolment refused: " + err.Error()}
	}
	if tok.CAFingerprint != s.cfg.CA.Fingerprint() {
		s.recordRefusal(r, req.Name, "WrongSite", "token was issued by another site's CA")
		return &httpError{http.StatusForbidden, "enrolment refused: token was issued by another site's CA"}
	}
	ttl := s.cfg.AgentCertTTL
	if tok.Role == pki.RoleCoordinator {
		ttl = CoordinatorCertTTL
	}
	certPEM, cert, err := s.cfg.CA.SignCSR([]byte(req.CSR), req.Name, tok.Role, ttl, time.Now())
	if err != nil {
		return &httpError{http.StatusBadRequest, "csr: " + err.Error()}
	}
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	cmd := state.Enroll{TokenID: tok.ID, SecretHash: tok.SecretHash(), Name: req.Name, Role: tok.Role,
		Serial: cert.SerialNumber.Text(16), NotAfter: cert.NotAfter, Remote: host}
	if err := s.propose(r.Context(), state.CmdEnroll, cmd); err != nil {
		var ee *state.EnrolError
		var he *httpError
		if errors.As(err, &ee) || (errors.As(err, &he) && he.Status == http.StatusForbidden) {
			return &httpError{http.StatusForbidden, "enrolment refused: " + err.Error()}
		}
		return err
	}
	cfg, err := s.agentConfigFor()
	if err != nil {
		return err
	}
	resp := wire.EnrollResponse{Cert: string(certPEM), CA: string(s.cfg.CA.CertPEM), Config: cfg}
	if tok.Role == pki.RoleCoordinator {
		keyPEM, err := pki.EncodeKey(s.cfg.CA.Key)
		if err != nil {
			return err
		}
		resp.CAKey, resp.DataKey = string(keyPEM), s.cfg.DataKey
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// recordRefusal notes a refusal the FSM never saw (malformed or foreign tokens).
func (s *Server) recordRefusal(r *http.Request, name, reason, msg string) {
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	ev := state.Event{Type: state.EventWarning, Object: "host/" + name, Reason: reason,
		Message: fmt.Sprintf("enrolment of %q from %s refused: %s", name, host, msg)}
	if err := s.propose(r.Context(), state.CmdRecordEvent, state.RecordEvent{Event: ev}); err != nil {
		s.log.Warn("could not record refusal event", "err", err)
	}
}

func (s *Server) raftJoin(w http.ResponseWriter, r *http.Request) error {
	var req wire.RaftJoinRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if id := identity(r); id.Name != req.Name {
		return &httpError{http.StatusForbidden, fmt.Sprintf("coordinator %q may only join as itself, not %q", id.Name, req.Name)}
	}
	if !s.cfg.Raft.IsLeader() {
		leader, _ := s.cfg.Raft.Leader()
		return &httpError{http.StatusServiceUnavailable, fmt.Sprintf("not the leader (leader is %q); ask it", leader)}
	}
	co := state.Coordinator{Name: req.Name, RaftAddr: req.RaftAddr, APIAddr: req.APIAddr, GossipAddr: req.GossipAddr, Witness: req.Witness}
	// Record the addresses first so forwarding to the new member works the moment it votes.
	if err := s.propose(r.Context(), state.CmdAddCoordinator, state.AddCoordinator{Coordinator: co}); err != nil {
		return err
	}
	if err := s.cfg.Raft.AddVoter(r.Context(), req.Name, req.RaftAddr); err != nil {
		return fmt.Errorf("add voter %s at %s: %w", req.Name, req.RaftAddr, err)
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}
