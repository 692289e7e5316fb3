package wire

import "github.com/plinth-dev/plinth/pkg/api"

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error  string           `json:"error"`
	Fields []api.FieldError `json:"fields,omitempty"`
}
