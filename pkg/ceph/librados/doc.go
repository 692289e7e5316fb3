// Package librados opens the sessions pkg/ceph's drivers use, with go-ceph (cgo,
// librados and librbd). It is compiled in only with -tags ceph plus the Ceph release
// tag go-ceph needs (pacific for Debian 12's Ceph 16): `make build` sets both. Without
// the ceph tag, Dial returns a Permanent error, so `go build ./...` and `go vet ./...`
// work on machines without librados-dev, and such an agent says why it cannot run
// Ceph steps instead of failing to build.
//
// It must never be imported by anything the coordinator links: only cmd/agent and
// tests use it.
package librados

// BuildTags are the tags an agent with Ceph support is built with.
const BuildTags = "ceph,pacific"
