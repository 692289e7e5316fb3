package coordinator

import (
	"github.com/plinth-dev/plinth/pkg/atomicfile"

	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

const fenceFile = "fenced.json"

// loadFences reads the coordinators fenced by recovery: name -> fence time. A
// certificate for that name issued before the fence time is refused.
func loadFences(dataDir string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	b, err := os.ReadFile(filepath.Join(dataDir, fenceFile))
	if os.IsNotExist(err) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("coordinator: read fences: %w", err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("coordinator: %s: %w", fenceFile, err)
	}
	return out, nil
}

func saveFences(dataDir string, f map[string]time.Time) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dataDir, fenceFile), b, 0o600); err != nil {
		return fmt.Errorf("coordinator: fences: %w", err)
	}
	return nil
}
