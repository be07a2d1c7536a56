package dashboard

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

const committed = "../../dashboards/esgrid.json"

// The committed dashboard is what the generator writes: a hand edit of
// the JSON, or a change here without go generate, fails.
func TestCommittedDashboardIsGenerated(t *testing.T) {
	want, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what internal/dashboard generates: run go generate ./internal/dashboard", committed)
	}
}

// The committed dashboard reads back into the SDK's types (Grafana's
// dashboard schema), every panel with a title and a query, every query
// filtered by the dashboard's variables.
func TestDashboardReadsBack(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	data, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard.Dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", committed, err)
	}
	panels := 0
	for _, p := range d.Panels {
		if p.Panel == nil {
			continue // a row
		}
		panels++
		if p.Panel.Title == nil || *p.Panel.Title == "" || len(p.Panel.Targets) == 0 {
			t.Errorf("panel %v: no title or no query", p.Panel.Id)
		}
	}
	if panels < 20 {
		t.Errorf("%d panels read back", panels)
	}
	names := map[string]bool{}
	for _, v := range d.Templating.List {
		names[v.Name] = true
	}
	for _, want := range []string{"datasource", "job", "run", "instance", "worker"} {
		if !names[want] {
			t.Errorf("no variable %s", want)
		}
	}
	if len(d.Annotations.List) != 4 {
		t.Errorf("%d annotations, want 4 (run start and end, worker joined and lost)", len(d.Annotations.List))
	}
}
