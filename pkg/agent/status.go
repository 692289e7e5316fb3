package agent

import (
	"context"
	"path/filepath"
	"time"

	"github.com/plinth-dev/plinth/pkg/agentid"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// Status is what `plinth-agent status` shows: the local identity and, if a
// coordinator answers, this host's steps.
type Status struct {
	Name              string           `json:"name"`
	Serial            string           `json:"serial"`
	NotAfter          time.Time        `json:"notAfter"`
	RenewAt           time.Time        `json:"renewAt"`
	Coordinators      []string         `json:"coordinators"`
	PendingResults    []string         `json:"pendingResults,omitempty"`
	DriftCheckSeconds int              `json:"driftCheckSeconds,omitempty"`
	Steps             []wire.AgentStep `json:"steps"`
	// StepsError says why Steps is empty when no coordinator answered.
	StepsError string `json:"stepsError,omitempty"`
}

// GetStatus reads the identity in stateDir and asks the coordinators for this host's
// steps (without their inputs). Only a missing or broken identity is an error.
func GetStatus(ctx context.Context, stateDir string) (Status, error) {
	if stateDir == "" {
		stateDir = DefaultStateDir
	}
	id, err := agentid.Load(stateDir)
	if err != nil {
		return Status{}, err
	}
	b, err := readBundle(stateDir)
	if err != nil {
		return Status{}, err
	}
	cert, err := pki.ParseCert(b.CertPEM)
	if err != nil {
		return Status{}, err
	}
	st := Status{Name: id.Name, Serial: cert.SerialNumber.Text(16), NotAfter: cert.NotAfter,
		RenewAt: renewAt(cert, time.Time{}), Coordinators: id.Coordinators, Steps: []wire.AgentStep{}}
	if ps, _ := newPendingStore(filepath.Join(stateDir, pendingDir)).List(); len(ps) > 0 {
		for _, p := range ps {
			st.PendingResults = append(st.PendingResults, p.ID)
		}
	}
	tc, err := b.ClientTLS("")
	if err != nil {
		return Status{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var steps wire.AgentSteps
	if _, err := client.New(id.Coordinators, tc).Do(ctx, "GET", wire.PathAgentSteps, nil, &steps); err != nil {
		st.StepsError = err.Error()
		return st, nil
	}
	for _, s := range steps.Steps {
		s.Inputs = nil // may hold resolved secrets: never printed
		st.Steps = append(st.Steps, s)
	}
	st.DriftCheckSeconds = steps.DriftCheckSeconds
	return st, nil
}
