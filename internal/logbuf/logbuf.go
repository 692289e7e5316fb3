// Package logbuf is a bytes.Buffer that tests hand to loggers and goroutines:
// writes and reads may come from any goroutine.
package logbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for concurrent use; the zero value is ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
