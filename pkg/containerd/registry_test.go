package containerd

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// startRegistry runs an in-memory OCI registry for mirror tests.
func startRegistry(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(s.Close)
	return s
}

// push uploads img as repo:tag with plain HTTP (monolithic blob uploads).
func push(t *testing.T, base, repo, tag string, img v1.Image) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		put(t, http.MethodPost, fmt.Sprintf("%s/v2/%s/blobs/uploads/?digest=%s", base, repo, d), "", b)
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	put(t, http.MethodPost, fmt.Sprintf("%s/v2/%s/blobs/uploads/?digest=%s", base, repo, cfgName), "", cfg)
	mt, err := img.MediaType()
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	put(t, http.MethodPut, fmt.Sprintf("%s/v2/%s/manifests/%s", base, repo, tag), string(mt), m)
}

func put(t *testing.T, method, url, contentType string, body []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: %s: %s", method, url, resp.Status, msg)
	}
}
