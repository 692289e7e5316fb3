package helmrelease

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"sigs.k8s.io/yaml"
)

// MaxArchiveBytes bounds a chart archive (compressed): archives travel through the
// coordinators' replicated store, and OpenStack-Helm's largest charts are a few
// hundred KiB.
const MaxArchiveBytes = 4 << 20

// Input errors: nothing has changed in the cluster when one of these is returned.
var (
	ErrTooLarge = errors.New("chart archive too large")
	ErrChart    = errors.New("not a chart archive")
	ErrRender   = errors.New("chart does not render")
	ErrValues   = errors.New("values are not a map")
)

// Chart is a validated chart archive.
type Chart struct {
	// Name and Version are Chart.yaml's.
	Name, Version string
	// Digest is the SHA-256 of the archive's bytes (hex).
	Digest string
	chart  *chartv2.Chart
}

// LoadChart validates a chart archive (.tgz, as `helm package` writes it).
func LoadChart(archive []byte) (*Chart, error) {
	if len(archive) > MaxArchiveBytes {
		return nil, fmt.Errorf("helmrelease: %w: %d bytes, at most %d", ErrTooLarge, len(archive), MaxArchiveBytes)
	}
	if len(archive) == 0 {
		return nil, fmt.Errorf("helmrelease: %w: empty archive (want a gzipped tar with Chart.yaml)", ErrChart)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return nil, fmt.Errorf("helmrelease: %w: %v (want a gzipped tar with Chart.yaml, as `helm package` writes)", ErrChart, err)
	}
	if err := ch.Validate(); err != nil {
		return nil, fmt.Errorf("helmrelease: %w: %v", ErrChart, err)
	}
	if ch.Metadata.APIVersion != chartv2.APIVersionV2 && ch.Metadata.APIVersion != chartv2.APIVersionV1 {
		return nil, fmt.Errorf("helmrelease: %w: chart %s: apiVersion %q (want v2)", ErrChart, ch.Name(), ch.Metadata.APIVersion)
	}
	sum := sha256.Sum256(archive)
	return &Chart{Name: ch.Name(), Version: ch.Metadata.Version, Digest: hex.EncodeToString(sum[:]), chart: ch}, nil
}

// ParseValues decodes YAML or JSON values and refuses anything but a map at the top
// (a list or a scalar is a common mistake in an override file). Empty input is an
// empty map.
func ParseValues(data []byte) (map[string]any, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("helmrelease: %w: %v", ErrValues, err)
	}
	switch m := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return m, nil
	default:
		return nil, fmt.Errorf("helmrelease: %w: top level is %s (want a map of keys to values)", ErrValues, kindOf(v))
	}
}

func kindOf(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64, int64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

// valuesDigest is the SHA-256 of the values' canonical JSON (sorted keys).
func valuesDigest(v map[string]any) (string, error) {
	if v == nil {
		v = map[string]any{}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("helmrelease: %w: %v", ErrValues, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Defaults returns a copy of the chart's values.yaml: the lowest override layer,
// shown by `app overrides show`.
func (c *Chart) Defaults() map[string]any {
	if c == nil || c.chart == nil {
		return map[string]any{}
	}
	out, _ := copyValue(c.chart.Values).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	return out
}

func copyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = copyValue(e)
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, e := range t {
			l[i] = copyValue(e)
		}
		return l
	}
	return v
}
