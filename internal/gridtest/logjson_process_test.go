package gridtest

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/docstest"
)

// TestProcessesLogJSON runs a grid with -log-json -v everywhere: an esrun
// master with a local worker, an esworker found through gossip and one
// behind its own relay. Every line each writes on stderr is one JSON
// object whose keys are docs/logs.md's vocabulary, a duration is a
// number of seconds under an _s key, the master and a worker name the
// worker with the same keys and values, and the run writes one Info
// record per generation, with gen, of, evals_per_s, eta_s and best, and
// no generation line on stdout.
func TestProcessesLogJSON(t *testing.T) {
	want := reference(t)
	vocab := logVocabulary(t)
	esrun, _ := binaries(t)
	dir := t.TempDir()
	m := &master{reportPath: filepath.Join(dir, "report.json"), ckPath: filepath.Join(dir, "state.ckpt")}
	m.proc = start(t, "esrun", esrun, keyEnv, append([]string{
		"-log-json", "-v", "-local", "1", "-min-workers", "3", "-listen", "127.0.0.1:0", "-gossip", "127.0.0.1:0",
		"-report", m.reportPath, "-checkpoint", m.ckPath,
	}, esFlags...)...)
	sub, err := m.waitStderr(withTimeout(t, runTimeout), regexp.MustCompile(`"msg":"listening","addr":"([^"]+)","gossip":"([^"]+)"`))
	if err != nil {
		t.Fatal(err)
	}
	m.data, m.gossip = sub[1], sub[2]
	w0 := startWorker(t, "w0", keyEnv, "-log-json", "-v", "-join", m.gossip)
	w1 := startWorker(t, "w1", keyEnv, "-log-json", "-v", "-join", m.gossip, "-relay", "127.0.0.1:0")
	sameRun(t, m.finish(t), want)
	exitedCleanly(t, w0, w1)

	recs := map[string][]map[string]any{}
	for _, p := range []*proc{m.proc, w0, w1} {
		recs[p.name] = jsonLines(t, p.name, p.stderr.String(), vocab)
	}

	// One generation record per generation, in order.
	var gens []map[string]any
	for _, r := range recs["esrun"] {
		if r["msg"] == "generation" {
			gens = append(gens, r)
		}
	}
	if len(gens) != wantGens {
		t.Errorf("%d generation records, want %d", len(gens), wantGens)
	}
	for i, r := range gens {
		g := want.rep.Generations[min(i, len(want.rep.Generations)-1)]
		best, _ := r["best"].(json.Number)
		if f, err := best.Float64(); err != nil || f != g.Best || r["level"] != "INFO" ||
			r["gen"] != json.Number(strconv.Itoa(i)) || r["of"] != json.Number(strconv.Itoa(wantGens-1)) {
			t.Errorf("generation record %d: %v; want gen %d of %d, best %v", i, r, i, wantGens-1, g.Best)
		}
		if _, ok := r["evals_per_s"].(json.Number); !ok {
			t.Errorf("generation record %d: evals_per_s %v, want a number", i, r["evals_per_s"])
		}
		if _, ok := r["eta_s"]; !ok {
			t.Errorf("generation record %d has no eta_s", i)
		}
	}
	if regexp.MustCompile(`(?m)^gen\s`).MatchString(m.stdout.String()) {
		t.Errorf("generation lines on stdout under -log-json:\n%s", m.stdout.String())
	}

	// The master's "worker joined" and the worker's "connected to the
	// master" name it alike (a connection that is replaced gets a new
	// worker_id on both sides).
	joined := map[string]map[any]bool{}
	for _, r := range recs["esrun"] {
		if name, ok := r["worker"].(string); ok && r["msg"] == "worker joined" {
			if joined[name] == nil {
				joined[name] = map[any]bool{}
			}
			joined[name][r["worker_id"]] = true
		}
	}
	for _, name := range []string{"w0", "w1"} {
		var seen bool
		for _, r := range recs[name] {
			if r["msg"] == "connected to the master" {
				seen = true
				if r["worker"] != name || !joined[name][r["worker_id"]] {
					t.Errorf("%s says worker=%v worker_id=%v; the master says %s joined as %v", name, r["worker"], r["worker_id"], name, joined[name])
				}
			}
		}
		if !seen {
			t.Errorf("%s never wrote that it connected", name)
		}
	}
}

// jsonLines parses each line of a process's stderr as one JSON object and
// checks its keys against vocab: every key is the vocabulary's (or one of
// slog's time, level and msg), and one ending in _s, a duration, is a
// number of seconds (or null, unknown).
func jsonLines(t *testing.T, name, stderr string, vocab map[string]bool) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		var r map[string]any
		if err := dec.Decode(&r); err != nil || dec.More() {
			t.Errorf("%s: a line on stderr is not one JSON object (%v): %q", name, err, line)
			continue
		}
		for k, v := range r {
			switch {
			case k == "time" || k == "level" || k == "msg":
			case !vocab[k]:
				t.Errorf("%s: key %q is not in docs/logs.md's vocabulary: %s", name, k, line)
			case strings.HasSuffix(k, "_s"):
				if _, ok := v.(json.Number); !ok && v != nil {
					t.Errorf("%s: %s = %v, want seconds: %s", name, k, v, line)
				}
			}
		}
		recs = append(recs, r)
	}
	return recs
}

// TestLogVocabularyNamesRefusalKinds: a summary of refusals (the
// master's refused connections, a node's gossip rejected) has one key per
// kind it counted, and each is in docs/logs.md's vocabulary. Which kinds
// a run's summaries hold depends on timing (a peer that closes a gossip
// stream before its header as it ends, say), so TestProcessesLogJSON
// meets them only now and then: it failed under load on refused_empty.
func TestLogVocabularyNamesRefusalKinds(t *testing.T) {
	vocab := logVocabulary(t)
	for _, kinds := range [][]string{grid.RefusedKinds(), grid.GossipRefusedKinds()} {
		for _, k := range kinds {
			if !vocab[k] {
				t.Errorf("refusal kind %q is a summary's key but not in docs/logs.md's vocabulary", k)
			}
		}
	}
}

// logVocabulary is the set of keys in the table of docs/logs.md's
// section "Vocabulary": each backquoted word of a row's first cell.
func logVocabulary(t *testing.T) map[string]bool {
	t.Helper()
	sec := docstest.Section(t, "docs/logs.md", "## Vocabulary")
	vocab := map[string]bool{}
	for _, line := range strings.Split(sec, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 3 {
			continue
		}
		for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(cells[1], -1) {
			vocab[m[1]] = true
		}
	}
	if len(vocab) < 20 {
		t.Fatalf("docs/logs.md's log vocabulary has %d keys", len(vocab))
	}
	return vocab
}
