package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/state"
	"github.com/plinth-dev/plinth/pkg/wire"
)

func (s *Server) apply(w http.ResponseWriter, r *http.Request) error {
	var req wire.ApplyRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	m, err := api.Decode(req.File, []byte(req.YAML))
	if err != nil {
		return err
	}
	if len(m.Applications) > 0 {
		return api.ErrorList{{File: req.File, Path: "applications[" + m.Applications[0].Metadata.Name + "].kind",
			Msg: "Application documents are uploaded with `plinth-coordinator app upload -f FILE` (with their chart archives), not applied"}}
	}
	m.Default()
	// The plan must be computed on current state: a coordinator just restarted, or a
	// lagging follower, would otherwise show changes already applied.
	if err := s.barrier(r); err != nil {
		return err
	}
	// The command carries what this state does not already declare (ApplyOf). Only
	// this coordinator's own FSM (the dry run, or the leader's commit) can say
	// ErrDeclarationsMoved in a way it can act on: then the file goes whole. A
	// follower forwards the file whole, so it does not compute the delta.
	whole := state.ApplyManifest{File: req.File, Manifest: *m}
	delta, ownFSM := whole, req.DryRun || s.cfg.Raft.IsLeader()
	// Validated here first only for the messages: this copy still knows which
	// document each object came from. The FSM's apply validates again, and decides.
	var verr error
	s.cfg.Store.Read(func(v state.View) {
		site, all := v.Merged(m)
		if errs := api.ValidateSet(req.File, site, all); len(errs) > 0 {
			verr = errs
			return
		}
		if ownFSM {
			delta = v.ApplyOf(req.File, m)
		}
	})
	if verr != nil {
		return verr
	}
	var index uint64
	run := func(body state.ApplyManifest) (any, error) {
		cmd, err := state.Encode(state.CmdApplyManifest, time.Now(), body)
		if err != nil {
			return nil, err
		}
		if req.DryRun {
			// The plan is the FSM's own apply, run on a copy of the state.
			return s.cfg.Store.DryRun(cmd)
		}
		// The FSM answers with what the apply changed (state.Plan), or refuses it whole.
		var resp any
		resp, index, err = s.commitAnswer(r.Context(), cmd)
		return resp, err
	}
	resp, err := run(delta)
	if errors.Is(err, state.ErrDeclarationsMoved) {
		resp, err = run(whole)
	}
	if err != nil {
		return err
	}
	if req.DryRun {
		diff, _ := resp.([]string)
		writeJSON(w, http.StatusOK, wire.ApplyResponse{DryRun: true, Plan: diff})
		return nil
	}
	plan, _ := resp.(state.Plan)
	writeJSON(w, http.StatusOK, wire.ApplyResponse{Plan: plan, Index: index})
	return nil
}

// getDocuments serves `get` for one document kind: the rows pkg/state keeps for it.
func (s *Server) getDocuments(k api.DocumentKind) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		var err error
		s.cfg.Store.Read(func(v state.View) { _, _, err = v.List(k.Kind) })
		if err != nil {
			return err
		}
		return s.block(w, r, func(v state.View) (any, uint64) {
			out, idx, _ := v.List(k.Kind)
			return out, idx
		})
	}
}

// HostDetail is what `describe host` shows; pkg/state builds it.
type HostDetail = state.HostDetail

// describeDocument serves `describe` for one document kind.
func (s *Server) describeDocument(k api.DocumentKind) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		name := r.PathValue("name")
		var err error
		s.cfg.Store.Read(func(v state.View) { _, _, err = v.Describe(k.Kind, name) })
		if err != nil {
			return fmt.Errorf("%w (see `plinth-coordinator get %s`)", err, k.Resource)
		}
		return s.block(w, r, func(v state.View) (any, uint64) {
			d, idx, _ := v.Describe(k.Kind, name)
			return d, idx
		})
	}
}

// deleteDocument serves `delete` for one document kind.
func (s *Server) deleteDocument(k api.DocumentKind) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		typ, body, err := state.DeleteCommand(k.Kind, r.PathValue("name"))
		if err != nil {
			return err
		}
		if err := s.propose(r.Context(), typ, body); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, struct{}{})
		return nil
	}
}

func (s *Server) getSteps(w http.ResponseWriter, r *http.Request) error {
	host := r.URL.Query().Get("host")
	return s.block(w, r, func(v state.View) (any, uint64) {
		steps := v.Steps(host)
		var idx uint64
		for _, st := range steps {
			idx = max(idx, st.ModifyIndex)
		}
		if len(steps) == 0 {
			idx = v.Index()
		}
		return steps, idx
	})
}

func (s *Server) retry(w http.ResponseWriter, r *http.Request) error {
	var req wire.RetryRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if err := s.propose(r.Context(), state.CmdStepRetry, state.StepRetry{ID: req.ID}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

func (s *Server) getEvents(w http.ResponseWriter, r *http.Request) error {
	var after uint64
	if a := r.URL.Query().Get("after"); a != "" {
		n, err := strconv.ParseUint(a, 10, 64)
		if err != nil {
			return &httpError{http.StatusBadRequest, "after: want an event id"}
		}
		after = n
	}
	return s.block(w, r, func(v state.View) (any, uint64) {
		evs := v.Events(after)
		idx := v.Index()
		if len(evs) == 0 {
			// Nothing new: report the caller's own index so the query keeps blocking.
			idx = 0
		}
		return evs, idx
	})
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) error {
	var req wire.TokenRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if req.Role != pki.RoleAgent && req.Role != pki.RoleCoordinator {
		return &httpError{http.StatusBadRequest, fmt.Sprintf("role: %q is not valid: want agent or coordinator", req.Role)}
	}
	if !validName(req.Name) {
		return &httpError{http.StatusBadRequest, fmt.Sprintf("name: %q is not a valid host name (lowercase letters, digits and '-', at most 63)", req.Name)}
	}
	if req.TTL <= 0 {
		req.TTL = time.Hour
	}
	if req.TTL > 7*24*time.Hour {
		return &httpError{http.StatusBadRequest, "ttl: at most 168h"}
	}
	now := time.Now()
	tok, err := pki.NewToken(req.Name, req.Role, s.cfg.CA.Fingerprint(), now.Add(req.TTL))
	if err != nil {
		return err
	}
	rec := state.TokenRecord{ID: tok.ID, SecretHash: tok.SecretHash(), Name: req.Name, Role: req.Role, Expires: tok.Expires}
	if err := s.propose(r.Context(), state.CmdCreateToken, state.CreateToken{Token: rec}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.TokenResponse{Token: tok.String(), ID: tok.ID, Name: tok.Name, Role: tok.Role, Expires: tok.Expires})
	return nil
}

func (s *Server) getTokens(w http.ResponseWriter, r *http.Request) error {
	if err := s.readBarrier(r); err != nil {
		return err
	}
	var out []state.TokenRecord
	s.cfg.Store.Read(func(v state.View) { out = v.Tokens() })
	for i := range out {
		out[i].SecretHash = ""
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) members(w http.ResponseWriter, r *http.Request) error {
	ms, err := s.cfg.Raft.Members()
	if err != nil {
		return err
	}
	byName := map[string]state.Coordinator{}
	s.cfg.Store.Read(func(v state.View) {
		for _, c := range v.Coordinators() {
			byName[c.Name] = c
		}
	})
	out := make([]wire.Member, 0, len(ms))
	for _, m := range ms {
		c := byName[m.ID]
		out = append(out, wire.Member{Name: m.ID, RaftAddr: m.Addr, APIAddr: c.APIAddr, Suffrage: m.Suffrage, Leader: m.Leader, Witness: c.Witness})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) error {
	id, _ := s.cfg.Raft.Leader()
	writeJSON(w, http.StatusOK, wire.Status{Name: s.cfg.Name, State: s.cfg.Raft.State(), Leader: id, AppliedIndex: s.cfg.Store.Index()})
	return nil
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	id, _ := s.cfg.Raft.Leader()
	if id == "" {
		return &httpError{http.StatusServiceUnavailable, "no raft leader known: " + s.quorumHint()}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "leader": id})
	return nil
}

func (s *Server) snapshotSave(w http.ResponseWriter, r *http.Request) error {
	if err := s.readBarrier(r); err != nil {
		return err
	}
	data, err := s.cfg.Store.Export()
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Plinth-Index", strconv.FormatUint(s.cfg.Store.Index(), 10))
	_, err = w.Write(data)
	return err
}

func (s *Server) snapshotRestore(w http.ResponseWriter, r *http.Request) error {
	data, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		return &httpError{http.StatusBadRequest, err.Error()}
	}
	if !json.Valid(data) {
		return &httpError{http.StatusBadRequest, "snapshot: not a JSON snapshot written by `plinth-coordinator snapshot save`"}
	}
	if err := s.propose(r.Context(), state.CmdRestore, state.Restore{Snapshot: data}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i, c := range s {
		alnum := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		if !alnum && (c != '-' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}
