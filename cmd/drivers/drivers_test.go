package main

import (
	"log/slog"
	"testing"

	"github.com/plinth-dev/plinth/pkg/driverexec"
	"github.com/plinth-dev/plinth/pkg/driverprog"
)

// TestDriversMatchStepKinds: every kind the step kind table gives plinth-drivers has
// a driver here, every driver here such a kind, and each driver comes from the
// package the table names (constructing drivers touches nothing on the host).
func TestDriversMatchStepKinds(t *testing.T) {
	byKind := drivers(driverprog.Options{StateDir: t.TempDir(), Log: slog.Default()})
	if _, err := driverprog.Registry(driverexec.Binary, byKind); err != nil {
		t.Fatal(err)
	}
	if err := driverprog.CheckPackages(byKind); err != nil {
		t.Fatal(err)
	}
}
