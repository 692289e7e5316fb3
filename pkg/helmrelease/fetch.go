package helmrelease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"helm.sh/helm/v4/pkg/registry"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"

	"github.com/plinth-dev/plinth/pkg/api"
)

// Source is a chart that is fetched at apply rather than uploaded: an OCI
// reference, or a chart of a chart repository (its URL, name and version).
type Source struct {
	OCI     string
	Repo    string
	Chart   string
	Version string
}

func (s Source) String() string {
	if s.OCI != "" {
		return s.OCI
	}
	v := s.Version
	if v == "" {
		v = "latest"
	}
	return fmt.Sprintf("%s %s %s", s.Repo, s.Chart, v)
}

// FetchOptions say how the site reaches its registry or repository.
type FetchOptions struct {
	// HTTPClient carries the site's TLS trust; nil is http.DefaultClient.
	HTTPClient *http.Client
	// PlainHTTP talks to an OCI registry without TLS (a registry on the site's
	// own management network); never the default.
	PlainHTTP bool
}

// maxIndexBytes bounds a repository's index.yaml.
const maxIndexBytes = 16 << 20

// ErrFetch: the chart could not be fetched from its registry or repository.
var ErrFetch = errors.New("chart not fetched")

// Fetch returns the chart archive a source names, within api.MaxChartArchiveBytes
// (LoadChart checks what it is). Nothing is written to disk and no Helm home is
// used: the coordinator keeps no repository configuration of its own.
func Fetch(ctx context.Context, src Source, opt FetchOptions) ([]byte, error) {
	hc := opt.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	fail := func(err error) ([]byte, error) {
		return nil, fmt.Errorf("helmrelease: %w: %s: %v", ErrFetch, src, err)
	}
	switch {
	case src.OCI != "":
		opts := []registry.ClientOption{registry.ClientOptHTTPClient(hc), registry.ClientOptWriter(io.Discard)}
		if opt.PlainHTTP {
			opts = append(opts, registry.ClientOptPlainHTTP())
		}
		c, err := registry.NewClient(opts...)
		if err != nil {
			return fail(err)
		}
		res, err := c.Pull(strings.TrimPrefix(src.OCI, registry.OCIScheme+"://"), registry.PullOptWithChart(true))
		if err != nil {
			return fail(err)
		}
		if res.Chart == nil || len(res.Chart.Data) == 0 {
			return fail(errors.New("the reference holds no chart layer"))
		}
		if len(res.Chart.Data) > api.MaxChartArchiveBytes {
			return fail(fmt.Errorf("%w: %d bytes (limit %d)", ErrTooLarge, len(res.Chart.Data), api.MaxChartArchiveBytes))
		}
		return res.Chart.Data, nil
	case src.Repo != "":
		base, err := url.Parse(strings.TrimSuffix(src.Repo, "/") + "/")
		if err != nil {
			return fail(err)
		}
		data, err := get(ctx, hc, base.JoinPath("index.yaml").String(), maxIndexBytes)
		if err != nil {
			return fail(fmt.Errorf("read the repository index: %w", err))
		}
		var idx repo.IndexFile
		if err := yaml.Unmarshal(data, &idx); err != nil {
			return fail(fmt.Errorf("the repository index is not an index.yaml: %w", err))
		}
		idx.SortEntries()
		cv, err := idx.Get(src.Chart, src.Version)
		if err != nil {
			return fail(err)
		}
		if len(cv.URLs) == 0 {
			return fail(fmt.Errorf("chart %s %s has no download URL in the index", src.Chart, cv.Version))
		}
		ref, err := url.Parse(cv.URLs[0])
		if err != nil {
			return fail(err)
		}
		return getOr(ctx, hc, base.ResolveReference(ref).String(), fail)
	}
	return fail(errors.New("neither an OCI reference nor a repository"))
}

func getOr(ctx context.Context, hc *http.Client, u string, fail func(error) ([]byte, error)) ([]byte, error) {
	b, err := get(ctx, hc, u, api.MaxChartArchiveBytes)
	if err != nil {
		return fail(err)
	}
	return b, nil
}

// get reads a URL, refusing more than limit bytes.
func get(ctx context.Context, hc *http.Client, u string, limit int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if len(b) > limit {
		return nil, fmt.Errorf("GET %s: %w: more than %d bytes", u, ErrTooLarge, limit)
	}
	return b, nil
}
