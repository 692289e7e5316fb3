package containerd

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// dialCRI returns a lazy connection to the CRI on containerd's socket.
func dialCRI(address string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("containerd: dial %s: %w", address, err)
	}
	return conn, nil
}

// pingCRI asks the CRI plugin for its version: it answers only once containerd has
// loaded the config and the plugin started, which is what the kubelet needs.
func pingCRI(ctx context.Context, address string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := dialCRI(address)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		return fmt.Errorf("containerd: CRI on %s: %w", address, err)
	}
	return nil
}

// criHasImage reports whether the CRI (and so the kubelet) sees image ref. The CRI
// learns about imported images from containerd's events, a moment after the import.
func criHasImage(ctx context.Context, conn *grpc.ClientConn, ref string) (bool, error) {
	resp, err := runtimeapi.NewImageServiceClient(conn).ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		return false, fmt.Errorf("containerd: CRI image status %s: %w", ref, err)
	}
	return resp.Image != nil, nil
}

// criImageNames is every repo tag and repo digest the CRI lists.
func criImageNames(ctx context.Context, conn *grpc.ClientConn) (map[string]bool, error) {
	resp, err := runtimeapi.NewImageServiceClient(conn).ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, fmt.Errorf("containerd: CRI list images: %w", err)
	}
	names := map[string]bool{}
	for _, img := range resp.Images {
		for _, n := range img.RepoTags {
			names[n] = true
		}
		for _, n := range img.RepoDigests {
			names[n] = true
		}
	}
	return names, nil
}

// waitReady polls check until it succeeds or timeout passes.
func waitReady(ctx context.Context, check func(context.Context) error, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (still failing after %s)", err, timeout)
		case <-tick.C:
		}
	}
}
