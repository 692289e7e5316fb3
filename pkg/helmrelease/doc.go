// Package helmrelease drives one Helm release at a time through the Helm v4 SDK
// (never the helm binary): install-or-upgrade, rollback, uninstall, status and
// history, against a cluster named by an admin kubeconfig.
//
// It owns what the SDK leaves to its callers:
//   - input checks before anything changes: a chart archive that is too large, not
//     a chart, or does not render, and values that are not a map, are refused with
//     ErrChart, ErrTooLarge, ErrRender or ErrValues;
//   - idempotence: a release carries the digests of the chart archive and of the
//     values it was made from (as Helm release labels), so applying the same chart
//     and values again makes no new revision;
//   - stuck releases (helm/helm#11863): a release left pending-install,
//     pending-upgrade or pending-rollback by a process that died is unlocked the way
//     Flux's helm-controller does it (its record is marked failed), then remediated
//     per Remediation: rolled back to its last good revision or reinstalled. A failed
//     release is remediated the same way on the next Apply, so neither wedges later
//     applies; Protected keeps a failed release for inspection instead of
//     uninstalling it.
//
// A pending release is taken to be stale: the caller must be the only driver of its
// releases (the coordinators' Raft leader). The package keeps no state of its own;
// Helm's release records (Secrets in the release's namespace) are the truth.
// It must never be linked into the agent: it pulls in the whole Helm SDK.
package helmrelease
