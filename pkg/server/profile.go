package server

import (
	"bytes"
	"fmt"
	"net/http"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Profiles are read from this coordinator's own runtime, over the admin API (mTLS,
// admins only), so an operator can see where a busy coordinator spends its time
// without a debug port: `plinth-coordinator debug profile cpu`.
const (
	defaultProfileSeconds = 30
	maxProfileSeconds     = 300
)

// profile writes one Go runtime profile in pprof's format: "cpu" samples for
// ?seconds= (default 30, at most 300); any other name is a runtime profile
// (heap, allocs, goroutine, mutex, block, threadcreate) as it stands now.
func (s *Server) profile(w http.ResponseWriter, r *http.Request) error {
	// Buffered: a failure after part of a profile was written could not be
	// reported in the status any more.
	var buf bytes.Buffer
	name := r.PathValue("name")
	if name != "cpu" {
		p := pprof.Lookup(name)
		if p == nil {
			return &httpError{http.StatusNotFound, fmt.Sprintf("profile %q: no such profile; valid: %s", name, strings.Join(profileNames(), ", "))}
		}
		if err := p.WriteTo(&buf, 0); err != nil {
			return fmt.Errorf("profile %s: %w", name, err)
		}
		return writeProfile(w, buf.Bytes())
	}
	secs := defaultProfileSeconds
	if v := r.URL.Query().Get("seconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxProfileSeconds {
			return &httpError{http.StatusBadRequest, fmt.Sprintf("seconds=%q: want a whole number of seconds from 1 to %d", v, maxProfileSeconds)}
		}
		secs = n
	}
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return &httpError{http.StatusConflict, "cpu profile: " + err.Error() + " (one at a time per coordinator)"}
	}
	t := time.NewTimer(time.Duration(secs) * time.Second)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
	pprof.StopCPUProfile()
	if err := r.Context().Err(); err != nil {
		return err
	}
	return writeProfile(w, buf.Bytes())
}

func writeProfile(w http.ResponseWriter, b []byte) error {
	w.Header().Set("Content-Type", "application/octet-stream")
	_, err := w.Write(b)
	return err
}

// profileNames lists what profile answers to, for its error message.
func profileNames() []string {
	out := []string{"cpu"}
	for _, p := range pprof.Profiles() {
		out = append(out, p.Name())
	}
	slices.Sort(out[1:])
	return out
}
