package driver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// DecodeInputs decodes a step's inputs into v, the one way every driver reads them.
// It is strict because the planner and the agent must agree on each kind's contract:
// an unknown field, a second JSON value or trailing bytes mean they do not (or the
// inputs were damaged), and running the step on what could be read would do the
// wrong thing. Every error is Permanent (no retry changes the inputs) and names the
// kind and, where encoding/json says, the field. JSON null leaves v as it is.
func DecodeInputs(kind string, raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return Permanent(fmt.Errorf("%s: invalid inputs: empty, want one JSON object", kind))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Permanent(fmt.Errorf("%s: invalid inputs: %s", kind, describeJSONError(err)))
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		return Permanent(fmt.Errorf("%s: invalid inputs: trailing data after the JSON value at offset %d, want exactly one value", kind, end))
	}
	return nil
}

// describeJSONError words an encoding/json error with the field it concerns.
func describeJSONError(err error) string {
	var typ *json.UnmarshalTypeError
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &typ) && typ.Field != "":
		return fmt.Sprintf("field %s: got JSON %s, want %s", typ.Field, typ.Value, typ.Type)
	case errors.As(err, &typ):
		return fmt.Sprintf("got JSON %s, want %s", typ.Value, typ.Type)
	case errors.As(err, &syn):
		return fmt.Sprintf("not JSON at offset %d: %s", syn.Offset, syn.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated JSON"
	}
	// "json: unknown field \"x\"" has no error type of its own.
	return strings.TrimPrefix(err.Error(), "json: ")
}
