package wire

import (
	"net/url"
	"time"
)

// Application routes: PathApps is the collection; PathApp, PathAppAction,
// PathAppOverrides and PathAppHistory build the paths under it.
const (
	PathApps = "/v1/apps"
	// Upload (POST PathApps) query parameters.
	QueryUpdate = "update" // ?update=true: app update of an uploaded application
	QueryDryRun = "dryRun" // ?dryRun=true: check and show, propose nothing
)

// PathApp is one application.
func PathApp(name string) string { return PathApps + "/" + url.PathEscape(name) }

// PathAppAction is a lifecycle request on an application: apply, abort or remove.
func PathAppAction(name, action string) string { return PathApp(name) + "/" + action }

// PathAppOverrides is the operator's values for one chart of an application.
func PathAppOverrides(app, chart string) string {
	return PathApp(app) + "/charts/" + url.PathEscape(chart) + "/overrides"
}

// PathAppHistory is the Helm revisions of an application's releases.
func PathAppHistory(name string) string { return PathApp(name) + "/history" }

// AppUpload carries an Application document as written and the chart archives
// it names (source.archive), for `app upload` and `app update`.
type AppUpload struct {
	File     string       `json:"file"`
	Document []byte       `json:"document"`
	Archives []AppArchive `json:"archives,omitempty"`
}

// AppArchive is one chart archive, named as the application's source.archive names it.
type AppArchive struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// AppUploadResponse says what the upload changed (or, with DryRun, would change).
type AppUploadResponse struct {
	DryRun bool     `json:"dryRun,omitempty"`
	Plan   []string `json:"plan"`
	Index  uint64   `json:"index,omitempty"`
}

// AppOverrides is one chart's merged values, as `app overrides show` prints them:
// Origins names the layer (chart, application, system, user) that set each leaf,
// keyed by dotted path. Secrets never appear: the system layer names Secrets only.
type AppOverrides struct {
	App     string            `json:"app"`
	Chart   string            `json:"chart"`
	Values  map[string]any    `json:"values"`
	Origins map[string]string `json:"origins"`
	// Note says what the values leave out (chart defaults of an oci or repo source,
	// fetched only at apply).
	Note string `json:"note,omitempty"`
}

// AppHistory is the Helm revisions of each chart of an application.
type AppHistory struct {
	App    string         `json:"app"`
	Charts []ChartHistory `json:"charts"`
}

// ChartHistory is one release's revisions, oldest first; Error says why they
// could not be read.
type ChartHistory struct {
	Chart     string     `json:"chart"`
	Release   string     `json:"release"`
	Namespace string     `json:"namespace"`
	Revisions []Revision `json:"revisions"`
	Error     string     `json:"error,omitempty"`
}

// Revision is one Helm revision of a release.
type Revision struct {
	Revision    int       `json:"revision"`
	State       string    `json:"state"`
	Chart       string    `json:"chart"`
	Description string    `json:"description,omitempty"`
	Updated     time.Time `json:"updated,omitempty"`
}
