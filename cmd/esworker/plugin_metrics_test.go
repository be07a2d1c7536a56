package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
)

// esworker's /metrics counts its plugins' processes, labelled with its
// name: a plugin that exits during an evaluation is seen there as a
// crash, and its starts: the start-up check's and the session's.
func TestPluginMetricsCountACrash(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("/usr/bin/python3 not found: the plugin needs it")
	}
	dir := t.TempDir()
	sdk, err := os.ReadFile("../../sdk/python/esgrid_plugin.py")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "esgrid_plugin.py"), sdk, 0o644)
	path := filepath.Join(dir, "crashy.py")
	src := "#!/usr/bin/python3\nimport os\nfrom esgrid_plugin import serve\n" +
		"serve(lambda x: os._exit(3) if x[0] > 0 else sum(v * v for v in x), dim=(1, 0), bounds=(-5, 5), name=\"crashy\")\n"
	if err := os.WriteFile(path, []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	ln := listenLoopback(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	drain, code, stderr := startRun(ctx, "-master", ln.Addr().String(), "-key", testSecret, "-slots", "1", "-name", "lab-3",
		"-plugin", "crashy="+path, "-metrics", "127.0.0.1:0", "-metrics-linger", "0")
	c, _ := acceptWorker(ctx, t, ln, grid.ProblemSpec{Name: "crashy", Dim: 3})
	c.Start(func(grid.Message) {})
	c.Send(&grid.Tasks{Gen: 0, Items: []grid.Task{{ID: 0, X: []float64{1, 0, 0}}}})

	serving := regexp.MustCompile(`msg="serving metrics" url=(\S+)`)
	crashed := `esgrid_plugin_process_events_total{event="crashed",plugin="crashy",worker="lab-3"} 1`
	var page string
	for !strings.Contains(page, crashed) {
		select {
		case <-ctx.Done():
			t.Fatalf("no %s; /metrics:\n%s\nlog:\n%s", crashed, page, stderr.text())
		case <-time.After(20 * time.Millisecond):
		}
		if m := serving.FindStringSubmatch(stderr.text()); m != nil {
			if resp, err := http.Get(m[1]); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				page = string(b)
			}
		}
	}
	for _, want := range []string{
		`esgrid_plugin_process_events_total{event="started",plugin="crashy",worker="lab-3"} 2`,
		`esgrid_plugin_process_events_total{event="protocol_error",plugin="crashy",worker="lab-3"} 0`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("no %s in /metrics:\n%s", want, page)
		}
	}
	close(drain)
	select {
	case <-code:
	case <-ctx.Done():
		t.Fatal("esworker did not exit after its drain")
	}
}
