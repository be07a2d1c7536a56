// Command esplan answers the question of docs/papers.md §4 for an esgrid grid:
// which machines are worth using, and with how many slots each. It
// measures the grid (calibrate), fits the paper's execution-time models
// (models) and searches the configurations with them (plan), writing a
// plan file that esrun and esworker act on with -plan.
//
//	esplan calibrate -workers 4 -key-file K -o cal.json     measure the live grid
//	esplan calibrate -o cal.json run1.json run2.json ...    or read esrun -report files
//	esplan models -cal cal.json                             the fitted models
//	esplan plan -cal cal.json -lu 300 -o plan.json          the best configurations
//
// Run esplan -h, or esplan COMMAND -h, for the flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/esgrid/esgrid/internal/flagx"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usageText = `Usage: esplan COMMAND [flags]

esplan measures a grid's machines, fits the execution-time models of
Kishimoto and Ichikawa (docs/papers.md §4) and predicts which machines to use,
with how many slots each, for tasks of a given size.

Commands:
  calibrate   run the LU load at several sizes N and slot counts M on the
              live grid (or read esrun -report files) and write the times
  models      fit and print the models of a calibration
  plan        search the configurations and write a plan file for
              esrun -plan and esworker -plan

esplan COMMAND -h prints a command's flags; esplan -version the build's
version. Exit status: 0 done, 1 failed, 2 a bad command line.
`

// usageError is a bad command line: one line on stderr, exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// run is esplan without the process: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return 2
	}
	var err error
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usageText)
		return flagx.ExitOK
	case "-version", "--version", "version":
		fmt.Fprintln(stdout, flagx.Version("esplan"))
		return flagx.ExitOK
	case "calibrate":
		err = runCalibrate(ctx, args[1:], stdout, stderr)
	case "models":
		err = runModels(args[1:], stdout, stderr)
	case "plan":
		err = runPlan(args[1:], stdout, stderr)
	default:
		err = usagef("unknown command %q", args[0])
	}
	var ue *usageError
	switch {
	case err == nil:
		return flagx.ExitOK
	case errors.Is(err, errHelp):
		return flagx.ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "esplan: %v (see esplan -h)\n", err)
		return flagx.ExitUsage
	default:
		fmt.Fprintf(stderr, "esplan: %v\n", err)
		return flagx.ExitFailure
	}
}

// errHelp: -h or -version was asked for and printed.
var errHelp = errors.New("help printed")

// parseCommand parses a command's flags into fs: -h prints usage and the
// flags, -version the version, and both yield errHelp; a deprecated name
// prints its notice on stderr; anything else wrong is a *usageError.
func parseCommand(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) error {
	err := flagx.Parse(fs, args)
	if err == nil || errors.Is(err, flagx.ErrVersion) {
		for _, n := range flagx.Deprecated(fs) {
			fmt.Fprintf(stderr, "esplan: %s\n", n)
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return errHelp
	case errors.Is(err, flagx.ErrVersion):
		fmt.Fprintln(stdout, flagx.Version("esplan"))
		return errHelp
	}
	return usagef("%v", err)
}
