package containerd

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/plinth-dev/plinth/pkg/containerd/containerdspec"
	"github.com/plinth-dev/plinth/pkg/driver"
)

func TestImportWithoutArchivesNeedsNoDaemon(t *testing.T) {
	d := NewImportDriver("", WithPaths(Paths{Address: filepath.Join(t.TempDir(), "none.sock")}))
	if res := driver.Run(context.Background(), d, mustJSON(t, containerdspec.ImportInputs{Snapshotter: "overlayfs"})); !res.OK() || len(res.Changes) != 0 {
		t.Fatalf("result = %+v", res)
	}
}

func TestImportErrors(t *testing.T) {
	dir := t.TempDir()
	tarPath := filepath.Join(dir, "a.tar")
	dockerArchive(t, tarPath, map[string]v1.Image{"registry.local/a:1": testImage(t, 1)})
	d := NewImportDriver("", WithPaths(Paths{Address: filepath.Join(dir, "none.sock")}))
	tests := []struct {
		name      string
		in        containerdspec.ImportInputs
		permanent bool
		msg       string
	}{
		{"relative path", containerdspec.ImportInputs{Snapshotter: "overlayfs", Archives: []containerdspec.Archive{{Path: "a.tar"}}}, true, "not absolute"},
		{"listed twice", containerdspec.ImportInputs{Snapshotter: "overlayfs", Archives: []containerdspec.Archive{{Path: tarPath}, {Path: tarPath}}}, true, "listed twice"},
		{"no snapshotter", containerdspec.ImportInputs{Archives: []containerdspec.Archive{{Path: tarPath}}}, true, "snapshotter"},
		{"wrong digest", containerdspec.ImportInputs{Snapshotter: "overlayfs", Archives: []containerdspec.Archive{{Path: tarPath, Digest: "sha256:" + strings.Repeat("a", 64)}}}, false, "has digest sha256:"},
		{"missing file", containerdspec.ImportInputs{Snapshotter: "overlayfs", Archives: []containerdspec.Archive{{Path: filepath.Join(dir, "b.tar")}}}, false, "no such file"},
		{"no daemon", containerdspec.ImportInputs{Snapshotter: "overlayfs", Archives: []containerdspec.Archive{{Path: tarPath}}}, false, "connect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, err := d.Diff(ctx, mustJSON(t, tt.in))
			if err == nil || driver.IsPermanent(err) != tt.permanent || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v; want permanent=%v containing %q", err, tt.permanent, tt.msg)
			}
		})
	}
}
