package wire

import (
	"net/url"
	"strconv"

	"github.com/plinth-dev/plinth/pkg/api"
)

// DocumentPath is the collection of one document kind: `get` reads it, describe
// and delete append "/" + name. PathSite and PathHosts are its values for Site and
// Host (TestDocumentPaths).
func DocumentPath(k api.DocumentKind) string { return "/v1/" + k.Resource }

// ProfilePath is the request for this coordinator's profile name; a cpu profile
// samples for seconds (the others are read as they stand).
func ProfilePath(name string, seconds int) string {
	p := PathProfile + url.PathEscape(name)
	if name == "cpu" {
		p += "?seconds=" + strconv.Itoa(seconds)
	}
	return p
}

// Paths of the coordinator API, shared by the server's route table and its callers.
// Routes with a trailing path value append it ("/v1/hosts/" + name).
const (
	// PathEnroll is served on the join port, to callers without a certificate yet.
	PathEnroll = "/v1/enroll"

	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
	PathMetrics = "/metrics"
	PathStatus  = "/v1/status"

	// Operator API.
	PathApply      = "/v1/apply"
	PathSite       = "/v1/site"
	PathHosts      = "/v1/hosts"
	PathSteps      = "/v1/steps"
	PathRetry      = "/v1/retry"
	PathEvents     = "/v1/events"
	PathTokens     = "/v1/tokens"
	PathMembers    = "/v1/members"
	PathSnapshot   = "/v1/snapshot"
	PathKubeconfig = "/v1/kubeconfig"
	// PathProfile + a profile name ("cpu", "heap", "goroutine", ...): this
	// coordinator's Go runtime profile, in pprof format, for admins.
	PathProfile = "/v1/debug/profile/"

	// Agent API: an agent may only read and report on its own host's steps.
	PathAgentSteps  = "/v1/agent/steps"
	PathAgentStart  = "/v1/agent/start"
	PathAgentResult = "/v1/agent/result"
	PathAgentDrift  = "/v1/agent/drift"
	PathAgentFacts  = "/v1/agent/facts"
	PathAgentRenew  = "/v1/agent/renew"
	PathAgentConfig = "/v1/agent/config"

	// Between coordinators.
	PathInternalApply = "/v1/internal/apply"
	PathRaftJoin      = "/v1/internal/raft-join"
)
