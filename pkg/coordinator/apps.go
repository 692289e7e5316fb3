package coordinator

import (
	"context"

	"github.com/plinth-dev/plinth/pkg/appplan"
	"github.com/plinth-dev/plinth/pkg/apprunner"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/state"
)

// runApps drives Applications while this coordinator leads (pkg/apprunner), as
// cluster-admin through the site's admin kubeconfig.
func (d *daemon) runApps(ctx context.Context) {
	r := apprunner.New(apprunner.Config{
		Store:      d.store,
		Propose:    d.propose,
		Kubeconfig: d.srv.AdminKubeconfig,
		Unseal: func(name string, ciphertext []byte) ([]byte, error) {
			return pki.Open(d.dataKey, ciphertext, []byte(name))
		},
		Log: d.log,
	})
	if err := r.Run(ctx); err != nil {
		d.log.Warn("leader: applications", "err", err)
	}
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
