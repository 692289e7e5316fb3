package helmrelease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v4/pkg/registry"
)

// TestFetchRepository serves a chart repository (index.yaml and an archive at a
// relative URL) over TLS and fetches the chart by name and version, and refuses
// what is not there.
func TestFetchRepository(t *testing.T) {
	a := demoChart(t, "0.2.0", nil)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/charts/index.yaml":
			fmt.Fprint(w, "apiVersion: v1\nentries:\n  demo:\n  - {name: demo, version: 0.2.0, urls: [demo-0.2.0.tgz]}\n  - {name: demo, version: 0.1.0, urls: [demo-0.1.0.tgz]}\n")
		case "/charts/demo-0.2.0.tgz":
			_, _ = w.Write(a)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	opt := FetchOptions{HTTPClient: srv.Client()}
	for _, version := range []string{"0.2.0", ""} {
		got, err := Fetch(ctx, Source{Repo: srv.URL + "/charts", Chart: "demo", Version: version}, opt)
		if err != nil {
			t.Fatalf("version %q: %v", version, err)
		}
		if c, err := LoadChart(got); err != nil || c.Version != "0.2.0" {
			t.Errorf("version %q: fetched %v, %v", version, c, err)
		}
	}
	for _, bad := range []Source{
		{Repo: srv.URL + "/charts", Chart: "nope"},
		{Repo: srv.URL + "/charts", Chart: "demo", Version: "0.1.0"}, // indexed, archive missing
		{Repo: srv.URL + "/elsewhere", Chart: "demo"},
	} {
		if _, err := Fetch(ctx, bad, opt); !errors.Is(err, ErrFetch) {
			t.Errorf("%s: %v, want ErrFetch", bad, err)
		} else {
			t.Logf("refused: %v", err)
		}
	}
	// Without the site's trust the repository's certificate is refused.
	if _, err := Fetch(ctx, Source{Repo: srv.URL + "/charts", Chart: "demo"}, FetchOptions{}); err == nil {
		t.Error("an untrusted repository certificate was accepted")
	}
}

// TestFetchOCI pushes a chart to a real OCI registry (go-containerregistry's, in
// process) with Helm's registry client and fetches it by reference.
func TestFetchOCI(t *testing.T) {
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	c, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptWriter(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	a := demoChart(t, "0.3.0", nil)
	if _, err := c.Push(a, host+"/charts/demo:0.3.0"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, err := Fetch(ctx, Source{OCI: "oci://" + host + "/charts/demo:0.3.0"}, FetchOptions{PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	if ch, err := LoadChart(got); err != nil || ch.Version != "0.3.0" || ch.Digest != mustChart(t, a).Digest {
		t.Errorf("fetched %v, %v", ch, err)
	}
	if _, err := Fetch(ctx, Source{OCI: "oci://" + host + "/charts/demo:9.9.9"}, FetchOptions{PlainHTTP: true}); !errors.Is(err, ErrFetch) {
		t.Errorf("missing tag: %v, want ErrFetch", err)
	}
}
