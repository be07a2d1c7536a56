// Command rastrigin-go is an example problem plugin written with esgrid's
// Go SDK: the built-in Rastrigin function, served as the plugin
// "rastrigin-go" for any dimension. A plugin of your own replaces the
// factory below by your problem (any problems.Problem).
//
// Build it and list it on a worker:
//
//	go build -o /opt/esgrid/plugins/rastrigin-go ./examples/plugins/rastrigin-go
//	esworker -join MASTER -key-file K -plugin rastrigin-go=/opt/esgrid/plugins/rastrigin-go
//
// Since it computes with the built-in's own code, a run on it equals a
// run on "-problem rastrigin" bit for bit (tested in problems/plugin).
package main

import (
	"fmt"
	"os"

	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/problems/plugin"
)

func main() {
	p, err := plugin.PerDim("rastrigin-go", 1, func(dim int) (problems.Problem, error) {
		return problems.New("rastrigin", dim)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "rastrigin-go:", err)
		os.Exit(1)
	}
	plugin.Main(p, plugin.Dims(1, 0))
}
