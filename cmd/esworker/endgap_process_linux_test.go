package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/sockq"
)

// A -once esworker stopped (SIGSTOP) while the master ends the run and
// goes: what the master sent last, its Shutdown among it, then its FIN,
// waits in the worker's receive queue, and the master's socket is gone
// (reset: a master's close does that when a frame came unread, and its
// orphan socket answers the worker's first write so). Continued, the
// worker must still read the Shutdown and exit 0 as a worker that heard
// the end, whatever its writes meet, not take the master for lost and
// look for one for ever. Found by the soak (seed 93000143): the worker's
// write failed (EPIPE) and the connection was closed before its reader
// had the Shutdown. Here the worker's reader itself makes it write first
// (it acknowledges a Cancel of held tasks at once), and has more than
// one read's worth to take before the Shutdown.
func TestProcessStoppedAcrossTheEndHearsIt(t *testing.T) {
	bin := buildEsworker(t)
	plug, events, gate := gatedPlugin(t)
	key, _ := grid.NewKey(testSecret)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(bin, "-master", ln.Addr().String(), "-name", "w1", "-once", "-slots", "1", "-plugin", "gated="+plug)
	cmd.Env = append(os.Environ(), grid.KeyEnv+"="+testSecret)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		os.WriteFile(gate, nil, 0o600)
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	wait := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("waited in vain for %s; esworker's log:\n%s", what, stderr.text())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}

	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	ln.Close() // the master is going: a worker that takes it for lost finds none
	conn, _, err := grid.Accept(ctx, nc, grid.AcceptConfig{
		Key: key,
		Welcome: func(*grid.Hello) (int32, grid.ProblemSpec, error) {
			return 1, grid.ProblemSpec{Name: "gated", Dim: 1}, nil
		},
		Conn: grid.ConnConfig{Heartbeat: time.Hour}, // only the frames below
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Start(func(grid.Message) {})
	sent := int64(0)
	send := func(m grid.Message) {
		if err := conn.Send(m); err != nil {
			t.Fatal(err)
		}
		sent++
	}
	send(&grid.Tasks{Gen: 2, Items: []grid.Task{{ID: 0, X: []float64{0.5}}}})
	// The gate stays shut: the task keeps the worker's one slot.
	wait("the plugin to evaluate the task", func() bool {
		b, _ := os.ReadFile(events)
		return strings.Contains(string(b), "evaluating")
	})

	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	wait("esworker to stop", func() bool { return procState(cmd.Process.Pid) == "T" })
	// Two tasks held, then cancelled: the worker acknowledges them at once
	// (a write); then more than its reader takes in one read (64 KiB);
	// then the end.
	send(&grid.Tasks{Gen: 2, Items: []grid.Task{{ID: 1, X: []float64{0.1}}, {ID: 2, X: []float64{0.2}}}})
	send(&grid.Cancel{Gen: 2, IDs: []int32{1, 2}})
	for range 4000 {
		send(grid.Heartbeat{})
	}
	send(&grid.Shutdown{Reason: "run over"})
	wait("the worker's kernel to have every byte", func() bool {
		return conn.Stats().FramesOut == sent && unsent(t, nc) == 0
	})
	if conn.Stats().BytesOut < 80<<10 {
		t.Fatalf("only %d bytes sent", conn.Stats().BytesOut)
	}
	nc.(*net.TCPConn).CloseWrite()
	nc.(*net.TCPConn).SetLinger(0) // the close resets the connection
	conn.Close()
	<-conn.Done()
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(gate, nil, 0o600) // the cancelled evaluation may end

	var werr error
	ended := false
	wait("esworker to exit", func() bool {
		select {
		case werr = <-exited:
			ended = true
			return true
		default:
		}
		return strings.Contains(stderr.text(), "lost the master")
	})
	log := stderr.text()
	if !ended {
		t.Fatalf("esworker took the master for lost, not the run for over; its log:\n%s", log)
	}
	if werr != nil {
		t.Fatalf("esworker exited with %v, want status 0; its log:\n%s", werr, log)
	}
	if !strings.Contains(log, `msg="the master ended the run"`) || !strings.Contains(log, `msg="the run is over"`) {
		t.Errorf("esworker did not say it heard the end; its log:\n%s", log)
	}
}

// unsent is the number of bytes in nc's send queue that its peer's
// kernel has not acknowledged.
func unsent(t *testing.T, nc net.Conn) int {
	t.Helper()
	n, err := sockq.Unsent(nc)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// procState is the state letter of process pid ("T": stopped), from
// /proc/pid/stat, or "" when it cannot be read.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return ""
	}
	return string(b[i+2])
}
