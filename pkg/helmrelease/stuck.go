package helmrelease

import (
	"context"
	"fmt"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
)

const unlockDescription = "Release unlocked from stale"

// unlock marks a stale pending revision failed, as Flux's helm-controller does:
// Helm refuses every operation on a release whose latest revision is pending
// ("another operation (install/upgrade/rollback) is in progress"), and only the
// process that wrote it would ever finish it.
func (d *Driver) unlock(cfg *action.Configuration, r *release.Release) (string, error) {
	was := r.Info.Status
	r.SetStatus(rcommon.StatusFailed, fmt.Sprintf("%s %s state by plinth (the process applying it stopped)", unlockDescription, was))
	if err := cfg.Releases.Update(r); err != nil {
		return "", fmt.Errorf("unlock revision %d from %s: %w", r.Version, was, err)
	}
	d.log.Warn("helm release unlocked from a stale pending state", "release", r.Name, "namespace", r.Namespace, "revision", r.Version, "was", string(was))
	return fmt.Sprintf("unlocked revision %d from stale %s", r.Version, was), nil
}

// remediate repairs a failed latest revision per the request's policy: roll back
// to the last revision that deployed, or uninstall so that Apply installs afresh.
// A protected release is never uninstalled.
func (d *Driver) remediate(ctx context.Context, cfg *action.Configuration, req Request, failed *release.Release) ([]string, error) {
	if req.Protected && !unlockedByUs(failed) {
		// Kept as it failed until the operator applies again: then it is upgraded in
		// place, never rolled back or reinstalled first.
		if good, err := lastGood(cfg, req.Release, failed.Version); err != nil {
			return nil, err
		} else if good != nil {
			return []string{fmt.Sprintf("protected: failed revision %d kept as it was and upgraded in place", failed.Version)}, nil
		}
	}
	if req.Remediation != RemediateReinstall {
		if good, err := lastGood(cfg, req.Release, failed.Version); err != nil {
			return nil, err
		} else if good != nil {
			if err := d.rollback(ctx, cfg, req.Release, good.Version, req.Wait); err != nil {
				return nil, fmt.Errorf("roll back failed revision %d to revision %d: %w", failed.Version, good.Version, err)
			}
			d.log.Info("helm release rolled back", "release", req.Release, "namespace", req.Namespace, "failed", failed.Version, "to", good.Version)
			return []string{fmt.Sprintf("rolled back failed revision %d to revision %d", failed.Version, good.Version)}, nil
		}
	}
	if req.Protected {
		// Never uninstalled: its data may be what the operator needs.
		return nil, fmt.Errorf("%w: revision %d failed (%s) and no earlier revision deployed; it is kept: uninstall it yourself (or set protected: false) and apply again", ErrProtected, failed.Version, failed.Info.Description)
	}
	if err := d.uninstall(ctx, cfg, req.Release, req.Wait); err != nil {
		return nil, fmt.Errorf("uninstall failed revision %d to reinstall: %w", failed.Version, err)
	}
	d.log.Info("helm release uninstalled to reinstall", "release", req.Release, "namespace", req.Namespace, "failed", failed.Version)
	return []string{fmt.Sprintf("uninstalled failed revision %d to reinstall", failed.Version)}, nil
}

// unlockedByUs says the revision failed only because Plinth unlocked it from a
// stale pending state (its process died): nothing to inspect, so even a protected
// release is remediated.
func unlockedByUs(r *release.Release) bool {
	return strings.HasPrefix(r.Info.Description, unlockDescription)
}

// lastGood is the newest revision before `before` that deployed (deployed or
// superseded), nil when there is none.
func lastGood(cfg *action.Configuration, name string, before int) (*release.Release, error) {
	hs, err := history(cfg, name)
	if err != nil {
		return nil, err
	}
	for i := len(hs) - 1; i >= 0; i-- {
		r := hs[i]
		if r.Version < before && (r.Info.Status == rcommon.StatusDeployed || r.Info.Status == rcommon.StatusSuperseded) {
			return r, nil
		}
	}
	return nil, nil
}
