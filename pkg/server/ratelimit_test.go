package server

import (
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
