// Command esplan answers the question of docs/papers.md §4 for an esgrid grid:
// which machines are worth using, and with how many slots each. It
// measures the grid (calibrate), fits the paper's execution-time models
// (models) and searches the configurations with them (plan), writing a
// plan file that esrun and esworker act on with -plan.
//
//	esplan calibrate -workers 4 -key-file K -o cal.json     measure the live grid
//	esplan calibrate -o cal.json run1.json run2.json ...    or read esrun -report files
//	esplan models -cal cal.json                             the fitted models
//	esplan plan -cal cal.json -n 300 -o plan.json           the best configurations
//
// Run esplan -h, or esplan COMMAND -h, for the flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
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

esplan COMMAND -h prints a command's flags.
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
		return 0
	case "calibrate":
		err = runCalibrate(ctx, args[1:], stdout, stderr)
	case "models":
		err = runModels(args[1:], stdout)
	case "plan":
		err = runPlan(args[1:], stdout)
	default:
		err = usagef("unknown command %q", args[0])
	}
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "esplan: %v (see esplan -h)\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "esplan: %v\n", err)
		return 1
	}
}

// errHelp: -h was asked for and printed.
var errHelp = errors.New("help printed")
