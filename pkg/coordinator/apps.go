package coordinator

import (
	"context"
	"fmt"

	"github.com/plinth-dev/plinth/pkg/appplan"
	"github.com/plinth-dev/plinth/pkg/apprunner"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/secretref"
	"github.com/plinth-dev/plinth/pkg/state"
)

// runApps drives Applications while this coordinator leads (pkg/apprunner).
func (d *daemon) runApps(ctx context.Context) {
	r := apprunner.New(apprunner.Config{
		Store:      d.store,
		Propose:    d.propose,
		Kubeconfig: d.adminKubeconfig,
		OpenSecret: d.openSecret,
		Log:        d.log,
	})
	if err := r.Run(ctx); err != nil {
		d.log.Warn("leader: applications", "err", err)
	}
}

// openSecret returns a secret of the state in plain text.
func (d *daemon) openSecret(name string) ([]byte, bool, error) {
	var sec state.SecretRecord
	var ok bool
	d.store.Read(func(v state.View) { sec, ok = v.Secret(name) })
	if !ok {
		return nil, false, nil
	}
	plain, err := pki.Open(d.dataKey, sec.Ciphertext, []byte(name))
	if err != nil {
		return nil, false, fmt.Errorf("secret %s: %w", name, err)
	}
	return plain, true, nil
}

// adminKubeconfig is the first controller's kube.init output.
func (d *daemon) adminKubeconfig() ([]byte, error) {
	var stepID string
	d.store.Read(func(v state.View) {
		if site, ok := v.Site(); ok && len(site.Site.Spec.Controllers) > 0 {
			stepID = plan.StepID(site.Site.Spec.Controllers[0], kubespec.KindInit, "")
		}
	})
	if stepID == "" {
		return nil, fmt.Errorf("the site declares no controllers yet")
	}
	kc, ok, err := d.openSecret(secretref.OutputName(stepID, kubespec.OutputAdminConf))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("step %s has not succeeded yet", stepID)
	}
	return kc, nil
}

// appPasswords are the generated secrets applications ask for.
func appPasswords(v state.View) []string {
	var out []string
	for _, a := range v.Apps() {
		for _, p := range a.Application.Spec.Passwords {
			out = append(out, appplan.PasswordSecret(a.Name(), p))
		}
	}
	return out
}
