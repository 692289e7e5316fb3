package server

import (
	"fmt"
	"testing"
	"time"
)

func TestEnrolLimiterPerAddress(t *testing.T) {
	l := newEnrolLimiter(time.Second, 3)
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		if !l.allow("10.0.0.5:4000", now) {
			t.Fatalf("attempt %d within the burst refused", i+1)
		}
	}
	if l.allow("10.0.0.5:4001", now) {
		t.Fatal("fourth attempt from the same address (another port) allowed")
	}
	if !l.allow("10.0.0.6:4000", now) {
		t.Fatal("another address was limited too")
	}
	if !l.allow("10.0.0.5:4002", now.Add(time.Second)) {
		t.Fatal("the bucket did not refill")
	}
}

// The global bound holds across addresses, each well within its own limit.
func TestEnrolLimiterGlobal(t *testing.T) {
	l := newEnrolLimiter(time.Second, 3).withGlobal(time.Second, 5)
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	for i := range 5 {
		if ok, _ := l.admit(fmt.Sprintf("10.0.1.%d:4000", i), now); !ok {
			t.Fatalf("attempt %d within the global burst refused", i+1)
		}
	}
	if ok, global := l.admit("10.0.1.9:4000", now); ok || !global {
		t.Fatalf("sixth address: ok=%v global=%v, want refused by the global bound", ok, global)
	}
	// An address over its own limit is refused by that, without using global budget.
	l = newEnrolLimiter(time.Second, 1).withGlobal(time.Second, 2)
	l.admit("10.0.2.1:1", now)
	if ok, global := l.admit("10.0.2.1:2", now); ok || global {
		t.Fatalf("same address again: ok=%v global=%v, want refused by its own bound", ok, global)
	}
	if ok, _ := l.admit("10.0.2.2:1", now); !ok {
		t.Fatal("the per-address refusal used up the global budget")
	}
	if ok, _ := l.admit("10.0.2.3:1", now.Add(time.Second)); !ok {
		t.Fatal("the global bucket did not refill")
	}
}
