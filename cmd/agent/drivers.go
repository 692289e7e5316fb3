package main

import (
	"log/slog"
	"path/filepath"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host"
)

// registry holds the drivers this agent can run; their state lives under
// stateDir/drivers.
func registry(stateDir string, log *slog.Logger) (*driver.Registry, error) {
	dir := filepath.Join(stateDir, "drivers")
	return driver.NewRegistry(
		host.NewNetworkDriver(dir, host.WithLogger(log)),
	)
}
