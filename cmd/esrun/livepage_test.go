package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestLivePageBrowser runs esrun with -metrics and loads its status page
// in a real headless browser (Debian's chromium): once the page's script
// has run, the DOM shows the generation, every worker and the timeline's
// bars.
func TestLivePageBrowser(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no chromium in CI: .ci/run should have installed Debian's chromium package")
		}
		t.Skip("no chromium on PATH: install Debian's chromium package (apt-get install chromium) to run this test")
	}
	if testing.Short() {
		t.Skip("runs a grid and a browser")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// A run that lasts until the test ends: 20 ms evaluations, on two
	// local workers of two slots.
	base := esrunSaying(t, ctx, []string{"-gens", "1000000", "-load-ms", "20", "-local", "2", "-slots", "2",
		"-metrics", "127.0.0.1:0", "-listen", "127.0.0.1:0", "-gossip", "127.0.0.1:0"}, `status page on http://([^/\s]+)/`, "where its status page is")
	base = "http://" + base + "/"

	// Wait for a generation done and bars to draw, as status.json says.
	var st struct {
		Gen       int               `json:"gen"`
		Instances []json.RawMessage `json:"instances"`
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for st.Gen < 1 || len(st.Instances) == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("no generation with instances on the page: %+v", st)
		case <-tick.C:
		}
		resp, err := http.Get(base + "status.json")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
	}

	// The page as the browser has it once its script has fetched and drawn.
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir="+t.TempDir(),
		"--virtual-time-budget=3000", "--dump-dom", base)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	page := string(dom)
	if m := regexp.MustCompile(`id="gen">(\d+) / 1000000<`).FindStringSubmatch(page); m == nil || m[1] == "0" {
		t.Errorf("the page shows no generation N / 1000000 past 0:\n%s", page)
	}
	for _, name := range []string{"local-1", "local-2"} {
		if !strings.Contains(page, "<td>"+name+"</td>") {
			t.Errorf("the workers' table has no %s:\n%s", name, page)
		}
	}
	if !regexp.MustCompile(`<rect [^>]*class="bar (original|replica|running)"`).MatchString(page) {
		t.Errorf("the timeline has no bar:\n%s", page)
	}
}
