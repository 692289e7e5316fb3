package server

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/wire"
)

// A request body over the limit is refused with 413 and the limit, not with a
// decoder's "unexpected EOF".
func TestReadJSONNamesTheLimit(t *testing.T) {
	body := `{"file": "big.yaml", "yaml": "` + strings.Repeat("x", maxBody) + `"}`
	r := httptest.NewRequest(http.MethodPost, "/v1/apply", strings.NewReader(body))
	var req wire.ApplyRequest
	err := readJSON(r, &req)
	var he *httpError
	if !errors.As(err, &he) || he.Status != http.StatusRequestEntityTooLarge || !strings.Contains(he.Msg, "larger than the limit of") {
		t.Fatalf("oversized body: %v", err)
	}
	r = httptest.NewRequest(http.MethodPost, "/v1/apply", strings.NewReader(`{"file": "a.yaml", "yaml": "x"}`))
	if err := readJSON(r, &req); err != nil || req.File != "a.yaml" {
		t.Fatalf("small body: %v %+v", err, req)
	}
}
