// unitstate prints each unit's ActiveState and UnitFileState as pkg/systemd reads
// them, one "unit active enabled" line per argument: the booted-host test compares
// them with systemctl's.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/plinth-dev/plinth/pkg/systemd"
)

func main() {
	ctx := context.Background()
	c, err := systemd.Dial(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer c.Close()
	for _, u := range os.Args[1:] {
		a, err := c.ActiveState(ctx, u)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		e, err := c.UnitFileState(ctx, u)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(u, a, e)
	}
}
