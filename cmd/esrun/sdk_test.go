package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/internal/testplugin"
)

// The SDKs as their users use them: a Go plugin in a module of its own
// that requires esgrid's, and the Python example on the Python SDK, each
// run by esrun in-process and on a local grid, equal to the built-in
// sphere bit for bit.

// userModuleMain is a plugin as a user writes it in a module of their
// own: a problems.Problem (the sphere, summed in the built-in's order)
// served by plugin.Main.
const userModuleMain = `package main

import (
	"context"

	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/problems/plugin"
)

type mySphere struct{}

var _ problems.Problem = mySphere{}

func (mySphere) Name() string                   { return "mysphere" }
func (mySphere) Bounds() (lower, upper float64) { return -5.12, 5.12 }

func (mySphere) Eval(ctx context.Context, x []float64) (float64, error) {
	s := 0.0
	for _, v := range x {
		s += v * v
	}
	return s, nil
}

func main() {
	plugin.Main(mySphere{}, plugin.Dims(1, 0))
}
`

// buildUserModule writes a module that requires esgrid's (replaced by
// this clone, as the README shows) and builds its plugin with go build,
// offline: whatever it needs is what this test was built from, already
// in the module cache.
func buildUserModule(t *testing.T) string {
	t.Helper()
	goTool, err := testplugin.GoTool()
	if errors.Is(err, testplugin.ErrNoGoTool) {
		t.Skip(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The user's module takes esgrid's requirements and their hashes
	// (go.sum), as go mod tidy would write them: go then finds all it
	// needs in the module cache that built esgrid, without the network
	// (the proxy or the checksum database).
	ownMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	requires := string(ownMod[bytes.Index(ownMod, []byte("\nrequire")):])
	goMod := "module example.com/mysphere\n\ngo 1.26\n\nrequire github.com/esgrid/esgrid v0.0.0\n" + requires + "\nreplace github.com/esgrid/esgrid => " + root + "\n"
	goSum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"go.mod": goMod, "go.sum": string(goSum), "main.go": userModuleMain} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(dir, "mysphere")
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, ".")
	cmd.Dir = dir
	// -mod=mod fills in go.mod's requirements; GOPROXY=off keeps it from
	// the network, GOWORK=off from any workspace around.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build in a module that requires esgrid's: %v\n%s", err, out)
	}
	return bin
}

func TestSDKPluginsEqualBuiltin(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	common := []string{"-dim", "5", "-mu", "4", "-lambda", "9", "-gens", "10", "-seed", "3", "-quiet"}
	report := func(name string, args ...string) string {
		t.Helper()
		path := filepath.Join(dir, name+".json")
		code, out, errOut := esrun(context.Background(), append(append(args, common...), "-report", path)...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", name, code, out, errOut)
		}
		return path
	}
	wantGens, wantBest, _ := trajectory(t, report("builtin", "-inprocess", "-problem", "sphere"))
	for _, sdk := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"mysphere", buildUserModule},
		{"sphere-py", func(t *testing.T) string {
			if _, err := os.Stat("/usr/bin/python3"); err != nil {
				t.Skip("/usr/bin/python3 not found: the Python example needs it")
			}
			path, err := filepath.Abs("../../examples/plugins/sphere-py/sphere.py")
			if err != nil {
				t.Fatal(err)
			}
			return path
		}},
	} {
		t.Run(sdk.name, func(t *testing.T) {
			plug := sdk.name + "=" + sdk.path(t)
			for _, mode := range []struct {
				name string
				args []string
			}{
				{"inprocess", []string{"-inprocess", "-slots", "2"}},
				{"grid", []string{"-local", "2", "-slots", "1"}},
			} {
				args := append([]string{"-problem", sdk.name, "-plugin", plug}, mode.args...)
				gens, best, _ := trajectory(t, report(sdk.name+"-"+mode.name, args...))
				if len(gens) != 11 || !reflect.DeepEqual(gens, wantGens) || !reflect.DeepEqual(best, wantBest) {
					t.Errorf("%s %s differs from the built-in sphere:\n%v\n%v", sdk.name, mode.name, gens, wantGens)
				}
			}
		})
	}
}
