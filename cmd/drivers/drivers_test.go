package main

import (
	"log/slog"
	"testing"

	"github.com/plinth-dev/plinth/pkg/driverexec"
	"github.com/plinth-dev/plinth/pkg/driverprog"
)

// TestDriversMatchStepKinds: the kinds the step kind table gives plinth-drivers and
// the drivers here are the same, each from the package the table names
// (constructing drivers touches nothing on the host).
func TestDriversMatchStepKinds(t *testing.T) {
	if err := driverprog.Check(driverexec.Binary, drivers(driverprog.Options{StateDir: t.TempDir(), Log: slog.Default()})); err != nil {
		t.Fatal(err)
	}
}
