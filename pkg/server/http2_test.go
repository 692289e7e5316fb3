package server

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/plinth-dev/plinth/pkg/wire"
)

// The API speaks HTTP/2 to a client that offers it, so an agent's concurrent
// requests share one connection, and HTTP/1.1 to one that does not.
func TestAPISpeaksHTTP2(t *testing.T) {
	admin, _, tc := singleCoordinatorTLS(t)
	url := "https://" + admin.Addrs()[0] + wire.PathHosts
	for _, tt := range []struct {
		name  string
		h2    bool
		proto int
	}{{"HTTP/2 offered", true, 2}, {"HTTP/1.1 only", false, 1}} {
		t.Run(tt.name, func(t *testing.T) {
			tr := &http.Transport{TLSClientConfig: tc.Clone(), ForceAttemptHTTP2: tt.h2}
			defer tr.CloseIdleConnections()
			req, err := http.NewRequestWithContext(context.Background(), "GET", url, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.ProtoMajor != tt.proto {
				t.Fatalf("%s: status %d over %s; want 200 over HTTP/%d", url, resp.StatusCode, resp.Proto, tt.proto)
			}
		})
	}
}
