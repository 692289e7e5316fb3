package client

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A coordinator that dies in the middle of a streamed body (snapshot save) must not
// make Do ask the next one: its body would be appended to the part already written.
func TestDoStopsAfterPartialBody(t *testing.T) {
	full := strings.Repeat("s", 64<<10)
	dying := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "65536")
		_, _ = w.Write([]byte(full[:1000]))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection is cut, as by kill -9
	}))
	defer dying.Close()
	refusing := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no leader", http.StatusServiceUnavailable)
	}))
	defer refusing.Close()
	healthy := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(full))
	}))
	defer healthy.Close()
	addr := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "https://") }
	tc := dying.Client().Transport.(*http.Transport).TLSClientConfig
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var buf bytes.Buffer
	_, err := New([]string{addr(dying), addr(healthy)}, tc).Do(ctx, "GET", "/v1/snapshot", nil, &buf)
	if err == nil {
		t.Fatalf("a body cut short was taken as complete (%d bytes)", buf.Len())
	}
	if buf.Len() >= len(full) {
		t.Fatalf("Do went on to the next coordinator after writing part of a body: %d bytes written", buf.Len())
	}

	// Failing before any byte is written still moves on to the next coordinator.
	buf.Reset()
	if _, err := New([]string{addr(refusing), addr(healthy)}, tc).Do(ctx, "GET", "/v1/snapshot", nil, &buf); err != nil || buf.String() != full {
		t.Fatalf("after a 503: %v, %d bytes", err, buf.Len())
	}
}

// Answers decoded into a value reuse the connection, also when they are larger than
// the server buffers (chunked) and end past the JSON value (the encoder's newline):
// a connection closed per answer costs a TLS handshake per request.
func TestDoReusesConnections(t *testing.T) {
	big := `{"steps":"` + strings.Repeat("x", 64<<10) + `"}` + "\n"
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/small" {
			_, _ = w.Write([]byte(`{"steps":"x"}` + "\n"))
			return
		}
		_, _ = w.Write([]byte(big))
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	tc := srv.Client().Transport.(*http.Transport).TLSClientConfig
	c := New([]string{strings.TrimPrefix(srv.URL, "https://")}, tc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 10 {
		var out struct{ Steps string }
		path := "/big"
		if i%2 == 0 {
			path = "/small"
		}
		if _, err := c.Do(ctx, "GET", path, nil, &out); err != nil || out.Steps == "" {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("10 sequential requests used %d connections, want 1", n)
	}
}
