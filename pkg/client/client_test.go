package client

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
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
