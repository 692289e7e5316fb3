package helmrelease

import (
	"errors"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/internal/charttest"
)

// chartArchive packs files as `helm package` does (internal/charttest).
func chartArchive(t testing.TB, name string, files map[string]string) []byte {
	return charttest.Archive(t, name, files)
}

// demoChart is a chart of objects that are ready without nodes or controllers: a
// ConfigMap carrying .Values.greeting, a Secret and a ClusterIP Service. Extra
// templates are added to it.
func demoChart(t testing.TB, version string, extra map[string]string) []byte {
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: demo\nversion: " + version + "\n",
		"values.yaml": "greeting: hello\nport: 80\n",
		"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-config}
data:
  greeting: {{ required "greeting is required" .Values.greeting | quote }}
`,
		"templates/secret.yaml": `apiVersion: v1
kind: Secret
metadata: {name: {{ .Release.Name }}-secret}
stringData: {token: not-a-real-secret}
`,
		"templates/service.yaml": `apiVersion: v1
kind: Service
metadata: {name: {{ .Release.Name }}}
spec:
  ports: [{port: {{ .Values.port }}}]
  selector: {app: {{ .Release.Name }}}
`,
	}
	for p, b := range extra {
		files[p] = b
	}
	return chartArchive(t, "demo", files)
}

func mustChart(t testing.TB, archive []byte) *Chart {
	t.Helper()
	c, err := LoadChart(archive)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLoadChart(t *testing.T) {
	c := mustChart(t, demoChart(t, "0.1.0", nil))
	if c.Name != "demo" || c.Version != "0.1.0" || len(c.Digest) != 64 {
		t.Errorf("chart %+v", c)
	}
	if again := mustChart(t, demoChart(t, "0.1.0", nil)); again.Digest != c.Digest {
		t.Errorf("the same archive gave digests %s and %s", c.Digest, again.Digest)
	}
	for name, tc := range map[string]struct {
		archive []byte
		want    error
		msg     string
	}{
		"empty":          {nil, ErrChart, "empty archive"},
		"not gzip":       {[]byte("just some text, not a chart"), ErrChart, "gzipped tar"},
		"no Chart.yaml":  {chartArchive(t, "x", map[string]string{"values.yaml": "a: 1\n"}), ErrChart, "Chart.yaml"},
		"no version":     {chartArchive(t, "x", map[string]string{"Chart.yaml": "apiVersion: v2\nname: x\n"}), ErrChart, "version"},
		"too large":      {make([]byte, MaxArchiveBytes+1), ErrTooLarge, "at most"},
		"bad Chart.yaml": {chartArchive(t, "x", map[string]string{"Chart.yaml": "- not\n- a map\n"}), ErrChart, ""},
	} {
		_, err := LoadChart(tc.archive)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want %v mentioning %q", name, err, tc.want, tc.msg)
		}
	}
}

func TestParseValues(t *testing.T) {
	v, err := ParseValues([]byte("greeting: hi\nnested: {a: [1, 2]}\n"))
	if err != nil || v["greeting"] != "hi" {
		t.Fatalf("got %v, %v", v, err)
	}
	if v, err := ParseValues(nil); err != nil || len(v) != 0 {
		t.Errorf("empty: got %v, %v", v, err)
	}
	for in, want := range map[string]string{
		"- a\n- b\n":   "a list",
		"just a word":  "a string",
		"42":           "a number",
		"true":         "a boolean",
		"a: [unclosed": "",
	} {
		_, err := ParseValues([]byte(in))
		if !errors.Is(err, ErrValues) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want ErrValues mentioning %q", in, err, want)
		}
	}
	d1, _ := valuesDigest(map[string]any{"a": 1, "b": map[string]any{"c": "d"}})
	d2, _ := valuesDigest(map[string]any{"b": map[string]any{"c": "d"}, "a": 1})
	if d1 != d2 {
		t.Error("the digest of equal values depends on the map's order")
	}
}

func TestRequestChecks(t *testing.T) {
	c := mustChart(t, demoChart(t, "0.1.0", nil))
	for name, tc := range map[string]struct {
		req  Request
		want error
		msg  string
	}{
		"release name":   {Request{Release: "Not_Valid", Namespace: "x", Chart: c}, ErrRequest, "release"},
		"namespace":      {Request{Release: "a", Chart: c}, ErrRequest, "namespace"},
		"chart":          {Request{Release: "a", Namespace: "x"}, ErrRequest, "no chart"},
		"remediation":    {Request{Release: "a", Namespace: "x", Chart: c, Remediation: "pray"}, ErrRequest, "rollback or reinstall"},
		"wait":           {Request{Release: "a", Namespace: "x", Chart: c, Wait: Wait{For: "some"}}, ErrRequest, "all or hooks"},
		"does not parse": {Request{Release: "a", Namespace: "x", Chart: c, Values: map[string]any{"greeting": nil}}, ErrRender, "greeting is required"},
	} {
		err := tc.req.check()
		if err == nil {
			err = tc.req.render()
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want %v mentioning %q", name, err, tc.want, tc.msg)
		}
	}
}
