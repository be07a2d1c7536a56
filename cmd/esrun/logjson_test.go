package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Under -log-json, stdout keeps the header and the result, and every line
// on stderr is JSON: one generation record per generation, and the error
// of a run that fails.
func TestLogJSON(t *testing.T) {
	code, stdout, stderr := esrun(t.Context(), "-inprocess", "-log-json", "-dim", "4", "-gens", "0", "-target", "1e300", "-max-evals", "170")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if regexp.MustCompile(`(?m)^gen\s`).MatchString(stdout) || !strings.Contains(stdout, "best ") {
		t.Errorf("stdout:\n%s", stdout)
	}
	var gens []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		if r["msg"] == "generation" {
			gens = append(gens, r)
		}
	}
	// -target 1e300 stops after generation 0; the budget says it could
	// have run to generation 2.
	if len(gens) != 1 || gens[0]["gen"] != 0.0 || gens[0]["of"] != 2.0 || gens[0]["level"] != "INFO" {
		t.Errorf("generation records %v", gens)
	}
	for _, k := range []string{"evals", "evals_per_s", "eta_s", "best", "mean", "wall_s"} {
		if len(gens) > 0 && gens[0][k] == nil {
			t.Errorf("generation record without %s: %v", k, gens[0])
		}
	}

	bad := filepath.Join(t.TempDir(), "bad.ckpt")
	if err := os.WriteFile(bad, []byte("not a checkpoint"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = esrun(t.Context(), "-inprocess", "-log-json", "-resume", bad)
	var r map[string]any
	if err := json.Unmarshal([]byte(stderr), &r); code != 1 || err != nil || r["level"] != "ERROR" || !strings.Contains(fmt.Sprint(r["err"]), bad) {
		t.Errorf("a failed run: exit %d, stderr %q", code, stderr)
	}
}
