// Command esreport reads the JSON report of a run (esrun -report FILE),
// prints a text summary of it and, with -png or -svg, draws it: per
// generation, the time stacked as compute, sync wait and comm (docs/papers.md
// §1, as in the paper's Fig. 5) and the efficiency against LB; the
// convergence (best and mean fitness of the parents per generation); each
// worker's utilisation; and a timeline of every worker's task instances.
//
//	esreport run.json
//	esreport run.json -png run.png -svg run.svg
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/report"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usageText = `Usage: esreport REPORT.json [-png FILE] [-svg FILE] [-width PX] [-height PX]

esreport prints a summary of a run's JSON report (esrun -report FILE):
where the time went (compute, sync wait and comm, esgrid's and the
paper's), the efficiency, what the policy did, the best fitness and each
worker's utilisation. With -png or -svg (or both) it also draws the run:
the time of every generation stacked as compute, sync wait and comm; its
efficiency against LB; the convergence (best and mean fitness of the
parents per generation); the utilisation of every worker; and a timeline
per worker of its task instances (originals, replicas, cancelled while
held or running, failed) and of when it was present. The pictures are
written whole, readable by all (mode 0644).

Exit status: 0 done, 1 the report could not be read or drawn, 2 a bad
command line.

Flags:
`

type options struct {
	report        string
	png, svg      string
	width, height int
}

// newFlagSet declares esreport's flags into o.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("esreport", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.png, "png", "", "draw the run into the PNG `FILE`")
	fs.StringVar(&o.svg, "svg", "", "draw the run into the SVG `FILE` (a vector picture, for the web or print)")
	flagx.IntVar(fs, &o.width, "width", 1200, minPixels, maxPixels, "the picture's width in `PX`")
	flagx.IntVar(fs, &o.height, "height", 2100, minPixels, maxPixels, "the picture's height in `PX`")
	flagx.VersionFlag(fs)
	return fs
}

// The picture's bounds: smaller, the plots do not fit; larger, it is
// hundreds of megabytes in memory.
const minPixels, maxPixels = 200, 10000

func parseOptions(args []string) (*options, error) {
	o := &options{}
	fs := newFlagSet(o)
	// The report may come before or after the flags.
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		o.report, args = args[0], args[1:]
	}
	if err := flagx.Parse(fs, args); err != nil {
		return nil, err
	}
	switch {
	case o.report == "" && fs.NArg() == 1:
		o.report = fs.Arg(0)
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case o.report == "":
		return nil, errors.New("name the report: esreport REPORT.json")
	}
	if err := flagx.CheckFiles(
		flagx.File{What: "-png " + o.png, Path: o.png, Write: true},
		flagx.File{What: "-svg " + o.svg, Path: o.svg, Write: true},
		flagx.File{What: "the report " + o.report, Path: o.report},
	); err != nil {
		return nil, err
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usageText)
		fs := newFlagSet(&options{})
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return flagx.ExitOK
	}
	if errors.Is(err, flagx.ErrVersion) {
		fmt.Fprintln(stdout, flagx.Version("esreport"))
		return flagx.ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "esreport: %v (esreport -h for help)\n", err)
		return flagx.ExitUsage
	}
	rep, err := report.Read(o.report)
	if err != nil {
		fmt.Fprintf(stderr, "esreport: %v\n", err)
		return flagx.ExitFailure
	}
	fmt.Fprint(stdout, report.Summary(rep))
	for _, pic := range []struct {
		path string
		f    report.Format
	}{{o.png, report.PNG}, {o.svg, report.SVG}} {
		if pic.path == "" {
			continue
		}
		if err := ctx.Err(); err != nil {
			return 1
		}
		if err := report.Draw(rep, pic.path, pic.f, o.width, o.height); err != nil {
			fmt.Fprintf(stderr, "esreport: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "picture: %s\n", pic.path)
	}
	return 0
}
