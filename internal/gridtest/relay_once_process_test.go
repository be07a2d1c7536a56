package gridtest

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// startMasterGossipAt is startMaster with its gossip at a given address
// (freeGossipAddr, faults_test.go).
func startMasterGossipAt(t *testing.T, policy string, minWorkers int, gossip string) *master {
	t.Helper()
	esrun, _ := binaries(t)
	dir := t.TempDir()
	m := &master{reportPath: filepath.Join(dir, "report.json"), ckPath: filepath.Join(dir, "state.ckpt")}
	args := append([]string{
		"-v", "-policy", policy, "-local", "0", "-min-workers", strconv.Itoa(minWorkers),
		"-listen", "127.0.0.1:0", "-gossip", gossip,
		"-report", m.reportPath, "-checkpoint", m.ckPath,
	}, esFlags...)
	m.proc = start(t, "esrun", esrun, keyEnv, args...)
	sub, err := m.waitStderr(withTimeout(t, 30*time.Second), listening)
	if err != nil {
		t.Fatalf("esrun: %v", err)
	}
	m.data, m.gossip = sub[1], sub[2]
	return m
}

// TestProcessesRelayBeforeItsMasterEndsWithTheRun: a relay started before
// its master (-join, with nobody there yet) waits for it as a worker
// does; -once workers behind it, and behind a relay chained behind it,
// and both relays, exit 0 when esrun ends the run.
func TestProcessesRelayBeforeItsMasterEndsWithTheRun(t *testing.T) {
	want := reference(t)
	gossip := freeGossipAddr(t)
	r1, r1addr := startRelayProc(t, "r1", keyEnv, "-relay-only", "-join", gossip)
	if _, err := r1.waitStderr(withTimeout(t, 30*time.Second), regexp.MustCompile(`cannot reach upstream; retrying`)); err != nil {
		t.Fatalf("the relay does not wait for its master: %v", err)
	}
	m := startMasterGossipAt(t, "r3q", 4, gossip)
	slots := []string{"-slots", "1"}
	r2, r2addr := startRelayProc(t, "r2", keyEnv, append([]string{"-master", r1addr}, slots...)...)
	w1 := startWorker(t, "w1", keyEnv, append([]string{"-master", r1addr}, slots...)...)
	w2 := startWorker(t, "w2", keyEnv, append([]string{"-master", r1addr}, slots...)...)
	w3 := startWorker(t, "w3", keyEnv, append([]string{"-master", r2addr}, slots...)...)
	sameRun(t, m.finish(t), want)
	exitedCleanly(t, w1, w2, w3, r2, r1)
}
