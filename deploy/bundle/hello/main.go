// Command hello is the bundle's tiny test web server (registry.local/hello): with no
// arguments it answers "hello from <hostname>" on :8080; `hello get URL` and
// `hello resolve NAME` are the client side tests run inside pods (Service reachability
// and cluster DNS through /etc/resolv.conf, with Go's own resolver).
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	switch {
	case len(args) == 2 && args[0] == "resolve":
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupHost(ctx, args[1])
		if err != nil {
			return err
		}
		fmt.Println(addrs)
		return nil
	case len(args) == 2 && args[0] == "get":
		// Test pods reach self-signed endpoints too (the API server): no verification.
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		r, err := c.Get(args[1])
		if err != nil {
			return err
		}
		defer r.Body.Close()
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		fmt.Printf("%s %s\n", r.Status, b)
		return nil
	case len(args) == 0:
		h, _ := os.Hostname()
		slog.Info("hello listening", "addr", ":8080", "host", h)
		http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "hello from %s\n", h) })
		srv := &http.Server{Addr: ":8080", ReadHeaderTimeout: 10 * time.Second}
		return srv.ListenAndServe()
	}
	return fmt.Errorf("usage: hello | hello get URL | hello resolve NAME")
}
