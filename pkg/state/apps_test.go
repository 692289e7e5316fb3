package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
)

// testApp is an application of two groups: db from archive db.tgz, web from an
// OCI reference.
func testApp(name string, values map[string]any) api.Application {
	return api.Application{
		TypeMeta: api.TypeMeta{APIVersion: api.APIVersion, Kind: api.KindApplication},
		Metadata: api.ObjectMeta{Name: name},
		Spec: api.ApplicationSpec{Groups: []api.ChartGroup{
			{Name: "infra", Charts: []api.Chart{{Name: "db", Release: "db", Namespace: "openstack", Source: api.ChartSource{Archive: "db.tgz"}, Values: values}}},
			{Name: "apps", Charts: []api.Chart{{Name: "web", Release: "web", Namespace: "openstack", Source: api.ChartSource{OCI: "oci://r.example/web:1"}}}},
		}},
	}
}

func upload(name string, archive string, update bool) AppUpload {
	return AppUpload{File: name + ".yaml", Application: testApp(name, map[string]any{"a": 1}), Archives: []Archive{{Name: "db.tgz", Data: []byte(archive)}}, Update: update}
}

func appOf(t *testing.T, l *log, name string) AppRecord {
	t.Helper()
	r, ok := l.view().App(name)
	if !ok {
		t.Fatalf("application %s missing", name)
	}
	return r
}

func isRequestErr(err error) bool {
	var ae *AppRequestError
	return errors.As(err, &ae)
}

func TestAppUploadAndUpdate(t *testing.T) {
	l := newLog(t)
	l.must(CmdAppUpload, upload("demo", "v1", false))
	r := appOf(t, l, "demo")
	if r.Status.State != api.AppUploaded || r.Application.Metadata.Generation != 1 || r.Desired != "" || r.Archives["db.tgz"] != ArchiveDigest([]byte("v1")) {
		t.Fatalf("after upload: %+v", r)
	}
	if _, ok := l.view().Archive(ArchiveDigest([]byte("v1"))); !ok {
		t.Fatal("archive not stored")
	}
	// Twice: refused, naming app update.
	if err := l.apply(CmdAppUpload, upload("demo", "v1", false)); !isRequestErr(err) || !strings.Contains(err.Error(), "app update") {
		t.Fatalf("second upload: %v", err)
	}
	// Update of a never-uploaded app: not found.
	if err := l.apply(CmdAppUpload, upload("other", "v1", true)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update of unknown app: %v", err)
	}
	// Update with nothing changed: no new generation.
	l.must(CmdAppUpload, upload("demo", "v1", true))
	if r := appOf(t, l, "demo"); r.Application.Metadata.Generation != 1 {
		t.Fatalf("unchanged update bumped generation to %d", r.Application.Metadata.Generation)
	}
	// Update of an uploaded (never applied) app: generation 2, still uploaded, no Op.
	l.must(CmdAppUpload, upload("demo", "v2", true))
	r = appOf(t, l, "demo")
	if r.Application.Metadata.Generation != 2 || r.Status.State != api.AppUploaded || r.Op != 0 {
		t.Fatalf("update of uploaded app: gen %d state %s op %d", r.Application.Metadata.Generation, r.Status.State, r.Op)
	}
	// The old archive is no longer referenced: collected.
	if _, ok := l.view().Archive(ArchiveDigest([]byte("v1"))); ok {
		t.Fatal("unreferenced archive v1 kept")
	}
	// Apply, then update: the update rolls out at once with Op+1.
	l.must(CmdAppRequest, AppRequest{Name: "demo", Action: AppActionApply, By: "admin"})
	op := appOf(t, l, "demo").Op
	l.must(CmdAppUpload, upload("demo", "v3", true))
	r = appOf(t, l, "demo")
	if r.Application.Metadata.Generation != 3 || r.Status.State != api.AppApplying || r.Op != op+1 || r.Status.Generation != 3 || len(r.Status.Charts) != 2 {
		t.Fatalf("update of applied app: %+v", r)
	}
	for _, c := range r.Status.Charts {
		if c.State != api.ChartPending || c.Release == "" {
			t.Errorf("chart after update: %+v", c)
		}
	}
}

func TestAppUploadRefusedChangesNothing(t *testing.T) {
	l := newLog(t)
	before, _ := l.s.Export()
	// A chart names an archive the upload does not carry; another archive is extra.
	bad := AppUpload{Application: testApp("demo", nil), Archives: []Archive{{Name: "other.tgz", Data: []byte("x")}}}
	if err := l.apply(CmdAppUpload, bad); err == nil || !strings.Contains(err.Error(), `archive "db.tgz" was not uploaded`) {
		t.Fatalf("missing archive: %v", err)
	}
	after, _ := l.s.Export()
	var a, b struct{ Tables tables }
	_ = json.Unmarshal(before, &a)
	_ = json.Unmarshal(after, &b)
	if len(b.Tables.Archives) != 0 || len(b.Tables.Apps) != 0 || len(b.Tables.Events) != len(a.Tables.Events) {
		t.Fatalf("refused upload left %d archives, %d apps", len(b.Tables.Archives), len(b.Tables.Apps))
	}
}

func TestAppLifecycleRequests(t *testing.T) {
	req := func(action string) AppRequest { return AppRequest{Name: "demo", Action: action, By: "admin"} }
	l := newLog(t)
	l.must(CmdAppUpload, upload("demo", "v1", false))

	for _, c := range []struct {
		action, want string
		refused      string // substring of the refusal, "" when it must succeed
	}{
		{AppActionAbort, api.AppUploaded, "only an applying or removing application can be aborted"},
		{AppActionRemove, api.AppUploaded, "was never applied"},
		{AppActionApply, api.AppApplying, ""},
		{AppActionDelete, api.AppApplying, "`app remove demo` its releases first"},
		{AppActionAbort, api.AppApplyFailed, ""},
		{AppActionAbort, api.AppApplyFailed, "only an applying or removing"},
		{AppActionApply, api.AppApplying, ""},
		{AppActionRemove, api.AppRemoving, ""},
		{AppActionApply, api.AppRemoving, "is being removed"},
		{AppActionAbort, api.AppRemoveFailed, ""},
		{AppActionRemove, api.AppRemoving, ""},
	} {
		op := appOf(t, l, "demo").Op
		err := l.apply(CmdAppRequest, req(c.action))
		r := appOf(t, l, "demo")
		switch {
		case c.refused == "" && err != nil:
			t.Fatalf("%s: %v", c.action, err)
		case c.refused != "" && (!isRequestErr(err) || !strings.Contains(err.Error(), c.refused)):
			t.Fatalf("%s in state %s: %v, want refusal %q", c.action, r.Status.State, err, c.refused)
		case c.refused == "" && r.Op != op+1:
			t.Fatalf("%s: op %d -> %d", c.action, op, r.Op)
		case c.refused != "" && r.Op != op:
			t.Fatalf("refused %s changed op", c.action)
		}
		if r.Status.State != c.want {
			t.Fatalf("after %s: state %s, want %s", c.action, r.Status.State, c.want)
		}
	}
	// The leader reports the removal done: back to uploaded; now delete works.
	r := appOf(t, l, "demo")
	l.must(CmdAppProgress, AppProgress{Name: "demo", Op: r.Op, Status: api.ApplicationStatus{State: api.AppUploaded}})
	if r := appOf(t, l, "demo"); r.Desired != "" || r.Status.State != api.AppUploaded {
		t.Fatalf("after removal: %+v", r)
	}
	if err := l.apply(CmdAppRequest, req(AppActionRemove)); !isRequestErr(err) {
		t.Fatalf("remove after removal: %v", err)
	}
	l.must(CmdAppRequest, req(AppActionDelete))
	if _, ok := l.view().App("demo"); ok {
		t.Fatal("deleted app still there")
	}
	if len(l.s.t.Archives) != 0 {
		t.Fatalf("archives of a deleted app kept: %d", len(l.s.t.Archives))
	}
	if err := l.apply(CmdAppRequest, req(AppActionApply)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("apply of deleted app: %v", err)
	}
	if err := l.apply(CmdAppRequest, AppRequest{Name: "x", Action: "explode"}); err == nil {
		t.Fatal("unknown action accepted")
	}
}

func TestAppProgressIsTaggedByOp(t *testing.T) {
	l := newLog(t)
	l.must(CmdAppUpload, upload("demo", "v1", false))
	l.must(CmdAppRequest, AppRequest{Name: "demo", Action: AppActionApply})
	op := appOf(t, l, "demo").Op
	st := api.ApplicationStatus{State: api.AppApplying, Progress: "group infra", Conditions: []api.Condition{{Type: "Applied", Status: "False", Reason: "Applying"}}}
	l.must(CmdAppProgress, AppProgress{Name: "demo", Op: op, Status: st, Events: []Event{{Type: EventNormal, Object: "app/demo/db", Reason: "Installing", Message: "installing db"}}})
	r := appOf(t, l, "demo")
	if r.Status.Progress != "group infra" || r.Status.Conditions[0].LastTransitionTime.IsZero() {
		t.Fatalf("progress not recorded: %+v", r.Status)
	}
	since := r.Status.Conditions[0].LastTransitionTime
	l.must(CmdAppProgress, AppProgress{Name: "demo", Op: op, Status: st})
	if got := appOf(t, l, "demo").Status.Conditions[0].LastTransitionTime; !got.Equal(since) {
		t.Errorf("unchanged condition moved its transition time: %v -> %v", since, got)
	}
	// An abort supersedes the run: its later progress is refused.
	l.must(CmdAppRequest, AppRequest{Name: "demo", Action: AppActionAbort})
	if err := l.apply(CmdAppProgress, AppProgress{Name: "demo", Op: op, Status: api.ApplicationStatus{State: api.AppApplied}}); !isRequestErr(err) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("stale progress: %v", err)
	}
	if r := appOf(t, l, "demo"); r.Status.State != api.AppApplyFailed {
		t.Fatalf("stale progress changed state to %s", r.Status.State)
	}
	d, _, err := l.view().Describe(api.KindApplication, "demo")
	if err != nil || !strings.Contains(mustJSON(t, d), "installing db") {
		t.Fatalf("describe lacks the progress event: %v", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAppOverrides(t *testing.T) {
	l := newLog(t)
	l.must(CmdAppUpload, upload("demo", "v1", false))
	l.must(CmdAppOverride, AppOverride{Name: "demo", Chart: "db", Values: json.RawMessage(`{"replicas":3}`)})
	if got := string(appOf(t, l, "demo").Overrides["db"]); got != `{"replicas":3}` {
		t.Fatalf("override: %s", got)
	}
	if err := l.apply(CmdAppOverride, AppOverride{Name: "demo", Chart: "nope", Values: json.RawMessage(`{}`)}); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "db, web") {
		t.Fatalf("unknown chart: %v", err)
	}
	if err := l.apply(CmdAppOverride, AppOverride{Name: "demo", Chart: "db", Values: json.RawMessage(`[1]`)}); err == nil || !strings.Contains(err.Error(), "mapping") {
		t.Fatalf("list override: %v", err)
	}
	if err := l.apply(CmdAppOverride, AppOverride{Name: "gone", Chart: "db"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("override of unknown app: %v", err)
	}
	// An update keeps the overrides of charts it keeps, drops the others'.
	l.must(CmdAppOverride, AppOverride{Name: "demo", Chart: "web", Values: json.RawMessage(`{"x":1}`)})
	up := upload("demo", "v1", true)
	up.Application.Spec.Groups = up.Application.Spec.Groups[:1]
	l.must(CmdAppUpload, up)
	if ov := appOf(t, l, "demo").Overrides; len(ov) != 1 || ov["db"] == nil {
		t.Fatalf("overrides after dropping web: %v", ov)
	}
	l.must(CmdAppOverride, AppOverride{Name: "demo", Chart: "db"})
	if ov := appOf(t, l, "demo").Overrides; len(ov) != 0 {
		t.Fatalf("cleared override kept: %v", ov)
	}
}

func TestAppArchivesSharedAndCollected(t *testing.T) {
	l := newLog(t)
	l.must(CmdAppUpload, upload("a", "same", false))
	l.must(CmdAppUpload, upload("b", "same", false))
	if n := len(l.s.t.Archives); n != 1 {
		t.Fatalf("one archive content, %d records", n)
	}
	l.must(CmdAppRequest, AppRequest{Name: "a", Action: AppActionDelete})
	if n := len(l.s.t.Archives); n != 1 {
		t.Fatalf("archive still used by b was collected (%d)", n)
	}
	l.must(CmdAppRequest, AppRequest{Name: "b", Action: AppActionDelete})
	if n := len(l.s.t.Archives); n != 0 {
		t.Fatalf("unreferenced archive kept (%d)", n)
	}
}

func TestAppSnapshotAndClone(t *testing.T) {
	l := newLog(t)
	l.must(CmdAppUpload, upload("demo", "chart-bytes", false))
	l.must(CmdAppOverride, AppOverride{Name: "demo", Chart: "db", Values: json.RawMessage(`{"k":"v"}`)})
	a, _ := l.s.Export()
	restored := snapshotRoundTrip(t, l.s)
	b, _ := restored.Export()
	if !bytes.Equal(a, b) {
		t.Fatalf("restore differs:\n%s\n%s", a, b)
	}
	var ar ArchiveRecord
	restored.Read(func(v View) { ar, _ = v.Archive(ArchiveDigest([]byte("chart-bytes"))) })
	if string(ar.Data) != "chart-bytes" {
		t.Fatalf("restored archive: %q", ar.Data)
	}
	// A copy of the tables shares archive records (immutable) but not the map.
	c := cloneTables(l.s.t)
	d := ArchiveDigest([]byte("chart-bytes"))
	if c.Archives[d] != l.s.t.Archives[d] {
		t.Fatal("clone copied the archive instead of sharing it")
	}
	delete(c.Archives, d)
	if _, ok := l.s.t.Archives[d]; !ok {
		t.Fatal("clone shares the archive map")
	}
	// A dry run of an upload shows it and changes nothing.
	cmd, _ := Encode(CmdAppUpload, t0, upload("other", "x", false))
	plan, err := l.s.DryRun(cmd)
	if err != nil || !strings.Contains(strings.Join(plan, "\n"), "+ application other") || !strings.Contains(strings.Join(plan, "\n"), "+ chart infra/db: release db in namespace openstack from archive db.tgz") {
		t.Fatalf("dry run: %v %q", err, plan)
	}
	if _, ok := l.view().App("other"); ok {
		t.Fatal("dry run stored the app")
	}
	if len(l.s.t.Archives) != 1 {
		t.Fatalf("dry run stored archives: %d", len(l.s.t.Archives))
	}
	cmd, _ = Encode(CmdAppUpload, t0, upload("demo", "chart-bytes-2", true))
	plan, err = l.s.DryRun(cmd)
	if err != nil || !strings.Contains(strings.Join(plan, "\n"), "~ application demo: generation 1 -> 2") || !strings.Contains(strings.Join(plan, "\n"), "~ chart infra/db: chart source or archive changed") {
		t.Fatalf("dry run of update: %v %q", err, plan)
	}
}
