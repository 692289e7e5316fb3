package agent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/host"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// gatherWith gathers the host's facts and adds kubeadm's certificates from kube.
func gatherWith(gather func(context.Context) (host.Facts, error), kube func() []api.CertValidity) func(context.Context) (host.Facts, error) {
	if gather == nil {
		gather = host.Gather
	}
	return func(ctx context.Context) (host.Facts, error) {
		f, err := gather(ctx)
		if err == nil && kube != nil {
			f.KubeCertificates = kube()
		}
		return f, err
	}
}

// factsLoop gathers the host's facts at start and every FactsInterval, and posts
// them only when their hash changed since the last accepted post.
func (a *agent) factsLoop(ctx context.Context) error {
	var posted string
	for {
		next := a.cfg.FactsInterval
		if h, err := a.reportFacts(ctx, posted); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			a.log.Warn("facts not reported", "err", err)
			next = min(next, 5*time.Second)
		} else {
			posted = h
		}
		if !sleep(ctx, next) {
			return nil
		}
	}
}

// reportFacts gathers facts and posts them unless their hash is posted; it returns
// the hash the coordinators now hold.
func (a *agent) reportFacts(ctx context.Context, posted string) (string, error) {
	f, err := a.gather(ctx)
	if err != nil {
		return posted, err
	}
	h := f.Hash()
	if h == posted {
		return posted, nil
	}
	raw, err := json.Marshal(f)
	if err != nil {
		return posted, err
	}
	if _, err := a.do(ctx, "POST", wire.PathAgentFacts, wire.FactsReport{Facts: raw, Hash: h}, nil); err != nil {
		return posted, err
	}
	a.log.Info("facts reported", "hash", h)
	return h, nil
}
