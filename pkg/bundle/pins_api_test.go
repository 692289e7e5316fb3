package bundle_test

import (
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/bundle"
)

// The pins must agree with what the planner renders by default (an external test:
// pkg/api imports pkg/bundle for its version rule).
func TestPinsMatchAPIDefaults(t *testing.T) {
	if bundle.DefaultPins.Kubernetes != api.DefaultKubernetesVersion {
		t.Errorf("DefaultPins.Kubernetes %s != api.DefaultKubernetesVersion %s", bundle.DefaultPins.Kubernetes, api.DefaultKubernetesVersion)
	}
	if want := "pause:" + bundle.DefaultPins.Pause; api.DefaultPauseImage != want {
		t.Errorf("api.DefaultPauseImage %s != %s", api.DefaultPauseImage, want)
	}
}
