//go:build tools

// Package tools pins modules that driver work in progress depends on, so parallel
// changes do not race on go.mod. Remove an import once real code uses the module.
package tools

import ()
