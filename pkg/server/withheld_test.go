package server

import (
	"slices"
	"testing"
)

// The steps an answer withheld are kept per host until an answer judges them
// again; one that judged every step of the host forgets those that are gone.
func TestWithheldStepsUpdate(t *testing.T) {
	var w withheldSteps
	w.update("h", []string{"h/a", "h/b", "h/c"}, []string{"h/b", "h/c"}, true)
	w.update("other", []string{"o/x"}, nil, false)
	if got := w.of("h"); !slices.Equal(got, []string{"h/b", "h/c"}) {
		t.Fatalf("after a full answer: %v", got)
	}
	w.update("h", []string{"h/b"}, nil, false) // h/b resolves now; h/c not judged
	if got := w.of("h"); !slices.Equal(got, []string{"h/c"}) {
		t.Fatalf("after a sparse answer resolving h/b: %v", got)
	}
	w.update("h", []string{"h/a"}, []string{"h/a"}, false)
	if got := w.of("h"); !slices.Equal(got, []string{"h/a", "h/c"}) {
		t.Fatalf("after h/a was withheld: %v", got)
	}
	w.update("h", []string{"h/a"}, nil, true) // h/c is gone
	if got := w.of("h"); len(got) != 0 {
		t.Fatalf("after a full answer withholding nothing: %v", got)
	}
	if got := w.of("other"); len(got) != 0 {
		t.Fatalf("other host: %v", got)
	}
}
