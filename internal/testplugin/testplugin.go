// Package testplugin builds the example Go plugin for tests that need a
// real plugin process (the plugin host, the worker, esrun and esworker).
package testplugin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Example is the import path of the example plugin Build builds.
const Example = "github.com/esgrid/esgrid/examples/plugins/rastrigin-go"

// NoCancel is the import path of the plugin "nocancel": Rastrigin, whose
// hello says it cannot be cancelled (internal/testplugin/nocancel).
const NoCancel = "github.com/esgrid/esgrid/internal/testplugin/nocancel"

// Gate is the import path of the plugin "gate": Rastrigin, whose
// evaluations a test can hold at a gate (internal/testplugin/gate).
const Gate = "github.com/esgrid/esgrid/internal/testplugin/gate"

// ErrNoGoTool says there is no go tool to build with: a test then skips.
var ErrNoGoTool = errors.New("no go tool to build the example plugin")

// Build builds the example plugin (examples/plugins/rastrigin-go) into
// dir and returns its path. It uses the go tool of the toolchain running
// the tests, else the one on PATH; without either it returns ErrNoGoTool.
func Build(dir string) (string, error) { return BuildPkg(dir, Example) }

// BuildPkg builds the plugin command pkg (an import path) into dir, named
// after pkg's last element, and returns its path; see Build.
func BuildPkg(dir, pkg string) (string, error) {
	goTool, err := GoTool()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, filepath.Base(pkg))
	if out, err := exec.Command(goTool, "build", "-o", path, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return path, nil
}

// GoTool is the go tool of the toolchain running the tests, else the one
// on PATH; without either, an error wrapping ErrNoGoTool.
func GoTool() (string, error) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			return "", fmt.Errorf("%w: %v", ErrNoGoTool, err)
		}
	}
	return goTool, nil
}

// MustBuild is Build for a test: it skips the test without a go tool and
// fails it if the build fails.
func MustBuild(tb testing.TB, dir string) string {
	tb.Helper()
	return MustBuildPkg(tb, dir, Example)
}

// MustBuildPkg is BuildPkg for a test, as MustBuild is Build.
func MustBuildPkg(tb testing.TB, dir, pkg string) string {
	tb.Helper()
	path, err := BuildPkg(dir, pkg)
	if errors.Is(err, ErrNoGoTool) {
		tb.Skip(err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return path
}
