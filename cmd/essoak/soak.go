package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/internal/soak"
)

// run is essoak: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args)
	if errors.Is(err, flag.ErrHelp) {
		fs := newFlagSet(&options{})
		fs.SetOutput(stdout)
		fs.Usage()
		return flagx.ExitOK
	}
	if errors.Is(err, flagx.ErrVersion) {
		fmt.Fprintln(stdout, flagx.Version("essoak"))
		return flagx.ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "essoak: %v (see essoak -h)\n", err)
		return flagx.ExitUsage
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano()) >> 1
	}
	passed, err := soak.Run(ctx, soak.Config{Duration: o.duration, Runs: o.runs, Seed: o.seed, Bin: o.bin, Keep: o.keep,
		Slack: o.slack, MaxRSS: o.maxRSS, Limits: o.limits, Replay: o.replay}, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "essoak: %v\n", err)
		return 1
	}
	if !passed {
		return 1
	}
	return 0
}
