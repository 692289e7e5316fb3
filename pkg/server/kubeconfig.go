package server

import (
	"fmt"
	"net/http"

	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/secretref"
	"github.com/plinth-dev/plinth/pkg/state"
)

// kubeconfig serves the site's admin kubeconfig to an admin: the output of the first
// controller's kube.init, kept sealed in the replicated state and opened only here.
// Each read is recorded as an event, so who took cluster-admin is on record.
func (s *Server) kubeconfig(w http.ResponseWriter, r *http.Request) error {
	plain, stepID, err := s.adminKubeconfig()
	if err != nil {
		return err
	}
	ev := state.Event{Type: state.EventNormal, Object: "step/" + stepID, Reason: "KubeconfigRead",
		Message: fmt.Sprintf("admin kubeconfig read by %s %q", identity(r).Role, identity(r).Name)}
	if err := s.propose(r.Context(), state.CmdRecordEvent, state.RecordEvent{Event: ev}); err != nil {
		s.log.Warn("could not record the kubeconfig read", "err", err)
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(plain)
	return nil
}

// adminKubeconfig opens the site's admin kubeconfig and names the kube.init step
// that wrote it; state.ErrNotFound (wrapped, saying why) until that step succeeded.
// Its callers use it as the coordinators' own cluster-admin identity, or hand it
// to an admin and record that.
func (s *Server) adminKubeconfig() ([]byte, string, error) {
	var stepID string
	var sec state.SecretRecord
	var found bool
	s.cfg.Store.Read(func(v state.View) {
		site, ok := v.Site()
		if !ok || len(site.Site.Spec.Controllers) == 0 {
			return
		}
		stepID = plan.StepID(site.Site.Spec.Controllers[0], kubespec.KindInit, "")
		sec, found = v.Secret(secretref.OutputName(stepID, kubespec.OutputAdminConf))
	})
	switch {
	case stepID == "":
		return nil, "", fmt.Errorf("admin kubeconfig: %w: the site declares no controllers yet", state.ErrNotFound)
	case !found:
		return nil, stepID, fmt.Errorf("admin kubeconfig: %w: step %s has not succeeded yet (see `plinth-coordinator get steps`)", state.ErrNotFound, stepID)
	}
	name := secretref.OutputName(stepID, kubespec.OutputAdminConf)
	plain, err := pki.Open(s.cfg.DataKey, sec.Ciphertext, []byte(name))
	if err != nil {
		return nil, stepID, fmt.Errorf("admin kubeconfig: %w", err)
	}
	return plain, stepID, nil
}

// AdminKubeconfig is the site's admin kubeconfig for the coordinator's own use
// (the leader's application runner); see adminKubeconfig.
func (s *Server) AdminKubeconfig() ([]byte, error) {
	kc, _, err := s.adminKubeconfig()
	return kc, err
}
