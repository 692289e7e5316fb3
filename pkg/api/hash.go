package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// SpecHash returns the hex SHA-256 of v's JSON encoding. The coordinator compares
// hashes to decide whether a spec changed and metadata.generation must be bumped, so the
// encoding must be canonical: encoding/json writes struct fields in declaration order
// and sorts map keys, which makes equal values hash equally.
//
// Callers should pass the Spec only (not metadata or status), otherwise bookkeeping
// would look like a change. It returns "" if v cannot be encoded as JSON, which never
// happens for the types of this package.
func SpecHash(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
