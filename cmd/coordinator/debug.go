package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/plinth-dev/plinth/pkg/wire"
)

func newDebug(g *globals) *cobra.Command {
	dbg := &cobra.Command{Use: "debug", Short: "Look inside a running coordinator"}
	var seconds int
	var addr string
	prof := &cobra.Command{
		Use:   "profile NAME FILE",
		Short: "Write a coordinator's Go runtime profile (cpu, heap, allocs, goroutine, ...) to FILE",
		Long: `profile reads one Go runtime profile from a coordinator, in pprof's format, for
` + "`go tool pprof`" + `. cpu samples for --seconds; the others (heap, allocs, goroutine,
mutex, block, threadcreate) are read as they stand. Admins only, over the API's mTLS.`,
		Example: `  plinth-coordinator debug profile cpu leader-cpu.pprof --seconds 20
  plinth-coordinator debug profile heap heap.pprof --coordinator 10.0.0.2:7443
  go tool pprof -top leader-cpu.pprof`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: fixedCompletion("cpu", "heap", "allocs", "goroutine", "mutex", "block", "threadcreate"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if addr != "" {
				c.SetAddrs([]string{addr})
			}
			path := wire.ProfilePath(args[0], seconds)
			if args[0] == "cpu" {
				fmt.Fprintf(cmd.ErrOrStderr(), "sampling for %ds\n", seconds)
			}
			if _, err := download(cmd.Context(), c, path, args[1]); err != nil {
				return fmt.Errorf("profile %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s profile to %s\n", args[0], args[1])
			return nil
		},
	}
	prof.Flags().IntVar(&seconds, "seconds", 30, "how long a cpu profile samples (1-300)")
	prof.Flags().StringVar(&addr, "coordinator", "", "API address (host:port) of the coordinator to profile (default: the first that answers)")
	dbg.AddCommand(prof)
	return dbg
}
