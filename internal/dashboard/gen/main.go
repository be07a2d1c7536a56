// Command gen writes esgrid's Grafana dashboard (package dashboard) to
// the file -o names: go generate ./internal/dashboard.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/esgrid/esgrid/internal/dashboard"
)

func main() {
	out := flag.String("o", "dashboards/esgrid.json", "write the dashboard to `FILE`")
	flag.Parse()
	data, err := dashboard.JSON()
	if err == nil {
		err = os.WriteFile(*out, data, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gen: %v\n", err)
		os.Exit(1)
	}
}
