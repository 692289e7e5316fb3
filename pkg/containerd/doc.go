// Package containerd runs the steps that prepare containerd for Kubernetes on a host.
//
// containerd.config writes containerd's config.toml and one certs.d/<registry>/hosts.toml
// per mirrored registry, and restarts the daemon when they changed (or when it does not
// answer), so the CRI runs with the site's sandbox image, mirrors, cgroup driver and
// snapshotter. images.import loads image archives already on the host into the k8s.io
// namespace through the containerd client, so that no host needs the internet.
//
// It owns config.toml, the hosts.toml files it wrote (marked by a header; others are
// never removed) and the image names its archives carry. It must never pull from a
// registry, delete images or touch containers, and it restarts containerd only through
// the injected restart function.
package containerd
