package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/freeport"
)

var realSlurm = flag.Bool("slurm", false, "submit deploy/slurm/esworker.sbatch as a job array to a real single-node Slurm (Debian's slurm-wlm and munge) that the test starts in a temporary directory (needs root)")

const sbatchPath = "../../deploy/slurm/esworker.sbatch"

// slurmCluster is munged, slurmctld and slurmd, run by the test from a
// directory of their own: their own munge key and socket, slurm.conf,
// state, spool and logs, and ports on loopback nobody else uses. Every
// process of it, and every job's, carries marker in its environment: the
// cleanup kills what is left of them.
type slurmCluster struct {
	dir    string
	conf   string
	marker string
	procs  []*exec.Cmd
	exited []chan struct{}
}

const slurmConf = `# A single-node cluster on loopback, for TestRealSlurm alone.
ClusterName=esgridtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={{ctld_port}}
SlurmdPort={{d_port}}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={{dir}}/munge/socket
StateSaveLocation={{dir}}/state
SlurmdSpoolDir={{dir}}/spool
SlurmctldPidFile={{dir}}/slurmctld.pid
SlurmdPidFile={{dir}}/slurmd.pid
SlurmctldLogFile={{dir}}/log/slurmctld.log
SlurmdLogFile={{dir}}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
# Two CPUs whatever the machine has: the two array tasks run at once.
SlurmdParameters=config_overrides
NodeName=esgridnode NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=esgrid Nodes=esgridnode Default=YES MaxTime=INFINITE State=UP
`

func startSlurm(t *testing.T, ctx context.Context) *slurmCluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("-slurm: needs root, to run slurmd (which runs jobs as their users) and munged")
	}
	for _, tool := range []string{"munged", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel", "sinfo"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("-slurm: %v (apt-get install slurm-wlm)", err)
		}
	}
	// A short directory of its own (a unix socket path must fit in 108
	// bytes), readable by all (munged wants its socket's directory so),
	// writable by root alone.
	dir, err := os.MkdirTemp("", "esgrid-slurm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, d := range []string{"", "munge", "state", "spool", "log", "jobs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(dir, d), 0o755)
	}
	sc := &slurmCluster{
		dir:    dir,
		conf:   filepath.Join(dir, "slurm.conf"),
		marker: "ESGRID_SLURM_TEST=" + strconv.FormatInt(time.Now().UnixNano(), 10),
	}
	t.Cleanup(func() { sc.stop(t) })
	key := make([]byte, 1024)
	rand.Read(key)
	if err := os.WriteFile(filepath.Join(dir, "munge", "munge.key"), key, 0o400); err != nil {
		t.Fatal(err)
	}
	ports := freeport.Ports(t, 2)
	conf := strings.NewReplacer("{{dir}}", dir, "{{ctld_port}}", strconv.Itoa(ports[0]), "{{d_port}}", strconv.Itoa(ports[1])).Replace(slurmConf)
	if err := os.WriteFile(sc.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	m := filepath.Join(dir, "munge")
	sc.daemon(t, "munged", "munged", "--foreground", "--force", "--socket="+m+"/socket", "--key-file="+m+"/munge.key",
		"--pid-file="+m+"/munged.pid", "--seed-file="+m+"/munged.seed", "--log-file="+dir+"/log/munged.log")
	waitFor(t, ctx, sc.logs, "munged's socket", func() bool {
		_, err := os.Stat(m + "/socket")
		return err == nil
	})
	sc.daemon(t, "slurmctld", "slurmctld", "-D", "-c", "-f", sc.conf)
	sc.daemon(t, "slurmd", "slurmd", "-D", "-N", "esgridnode", "-f", sc.conf)
	waitFor(t, ctx, sc.logs, "the node idle", func() bool {
		out, _ := sc.run(ctx, "sinfo", "-h", "-N", "-o", "%t")
		return strings.TrimSpace(out) == "idle"
	})
	return sc
}

// daemon starts a daemon in the foreground, its output in log/NAME.out.
func (sc *slurmCluster) daemon(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := os.Create(filepath.Join(sc.dir, "log", name+".out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = sc.env()
	// Its own process group: a signal to the test's group does not reach
	// it, the cleanup does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	sc.procs = append(sc.procs, cmd)
	sc.exited = append(sc.exited, exited)
}

// env is the daemons' and the clients' environment: the cluster's
// slurm.conf, and the marker.
func (sc *slurmCluster) env() []string {
	return append(os.Environ(), "SLURM_CONF="+sc.conf, sc.marker)
}

// run runs a Slurm client command against the cluster.
func (sc *slurmCluster) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = sc.env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// logs is every daemon's log, for a failure's message.
func (sc *slurmCluster) logs() string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(sc.dir, "log", "*"))
	for _, f := range files {
		text, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "--- %s\n%s", filepath.Base(f), text)
	}
	return b.String()
}

// stop cancels what jobs are left, stops the daemons (SIGTERM, then
// SIGKILL after 30 s), and kills whatever still carries the marker: a
// job's slurmstepd or esworker. Bounded, and run even when the test fails.
func (sc *slurmCluster) stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if len(sc.procs) >= 2 { // slurmctld runs
		sc.run(ctx, "scancel", "--full", "--partition=esgrid")
	}
	for i := len(sc.procs) - 1; i >= 0; i-- {
		sc.procs[i].Process.Signal(syscall.SIGTERM)
		select {
		case <-sc.exited[i]:
		case <-time.After(30 * time.Second):
			syscall.Kill(-sc.procs[i].Process.Pid, syscall.SIGKILL)
			<-sc.exited[i]
		}
	}
	// Nothing of the cluster may outlive the test.
	kill, cancelKill := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelKill()
	if left := leftBehind(kill, sc.marker); len(left) > 0 {
		t.Errorf("processes of the test's Slurm left behind, killed: %v", left)
	}
}

// deploy/slurm/esworker.sbatch as a lab's user submits it: a job array
// of two esworker agents, sbatch'ed to a real Slurm (its single node on
// loopback, started here), joins a real esrun master waiting for two
// workers; the run finishes on them, and each task then exits 0 (-once),
// which Slurm records.
//
//	go test ./cmd/esworker -run TestRealSlurm -slurm
func TestRealSlurm(t *testing.T) {
	if !*realSlurm {
		t.Skip("give -slurm to submit deploy/slurm/esworker.sbatch to a real Slurm (as root, with slurm-wlm installed)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	worker := buildEsworker(t)
	esrunBin := filepath.Join(t.TempDir(), "esrun")
	if out, err := exec.Command("go", "build", "-o", esrunBin, "../esrun").CombinedOutput(); err != nil {
		t.Fatalf("go build esrun: %v\n%s", err, out)
	}
	sc := startSlurm(t, ctx)
	jobs := filepath.Join(sc.dir, "jobs")
	key := writeFile(t, jobs, "key", testSecret+"\n", 0o600)
	copyFile(t, worker, filepath.Join(jobs, "esworker"))

	// The master: waits for the two workers, then runs a short ES on
	// them. Its gossip address is what the job array joins.
	report := filepath.Join(jobs, "report.json")
	master := exec.CommandContext(ctx, esrunBin, "-local", "0", "-min-workers", "2", "-listen", "127.0.0.1:0", "-gossip", "127.0.0.1:0",
		"-key-file", key, "-problem", "sphere", "-dim", "4", "-mu", "3", "-lambda", "8", "-gens", "10", "-quiet", "-report", report)
	var masterOut syncBuffer
	master.Stdout, master.Stderr = &masterOut, &masterOut
	master.Env = append(os.Environ(), sc.marker)
	if err := master.Start(); err != nil {
		t.Fatal(err)
	}
	masterDone := make(chan error, 1)
	go func() { masterDone <- master.Wait() }()
	defer func() {
		master.Process.Kill()
		<-masterDone
	}()
	listening := regexp.MustCompile(`(?m)^esrun: listening data=\S+ gossip=(\S+)$`)
	var gossip string
	waitFor(t, ctx, masterOut.text, "the master listening", func() bool {
		m := listening.FindStringSubmatch(masterOut.text())
		if m != nil {
			gossip = m[1]
		}
		return m != nil
	})

	// The job array, as the script's header says to submit it; the
	// settings it takes from the environment point at this test's files.
	out, err := sc.run(ctx, "sbatch", "--parsable", "--array=0-1", "--cpus-per-task=1", "--chdir="+jobs,
		"--export=ALL,ESWORKER="+filepath.Join(jobs, "esworker")+",KEY_FILE="+key+",IDLE_TIMEOUT=5m",
		sbatchPath, gossip)
	if err != nil {
		t.Fatalf("sbatch: %v\n%s", err, out)
	}
	jobID := strings.TrimSpace(out)
	if _, err := strconv.Atoi(jobID); err != nil {
		t.Fatalf("sbatch printed %q, want a job id", out)
	}
	jobLogs := func() string {
		var b strings.Builder
		files, _ := filepath.Glob(filepath.Join(jobs, "esworker-*.log"))
		for _, f := range files {
			text, _ := os.ReadFile(f)
			fmt.Fprintf(&b, "--- %s\n%s", filepath.Base(f), text)
		}
		return fmt.Sprintf("master:\n%s\njobs:\n%s\nslurm:\n%s", masterOut.text(), b.String(), sc.logs())
	}

	select {
	case err := <-masterDone:
		masterDone <- err // for the deferred kill
		if err != nil {
			t.Fatalf("esrun: %v\n%s", err, jobLogs())
		}
	case <-ctx.Done():
		t.Fatalf("the run did not finish\n%s", jobLogs())
	}
	// Both array tasks served the run, under the names the script gives.
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Schedule struct {
			PerWorker []struct {
				Name     string `json:"name"`
				Accepted int    `json:"accepted"`
			} `json:"per_worker"`
		} `json:"schedule"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range rep.Schedule.PerWorker {
		names = append(names, w.Name)
	}
	slices.Sort(names)
	if want := []string{"slurm-" + jobID + "-0", "slurm-" + jobID + "-1"}; !slices.Equal(names, want) {
		t.Errorf("the run's workers %v, want the array's tasks %v\n%s", names, want, jobLogs())
	}

	// -once: each task exits 0 when the run is over, and Slurm says so.
	stateRe, codeRe := regexp.MustCompile(`\bJobState=(\S+)`), regexp.MustCompile(`\bExitCode=(\S+)`)
	states := map[string]string{}
	waitFor(t, ctx, func() string { return fmt.Sprintf("%v\n%s", states, jobLogs()) }, "both tasks ended", func() bool {
		for _, task := range []string{"0", "1"} {
			out, _ := sc.run(ctx, "scontrol", "show", "job", jobID+"_"+task)
			state, code := stateRe.FindStringSubmatch(out), codeRe.FindStringSubmatch(out)
			if state == nil || code == nil {
				return false
			}
			switch state[1] {
			case "PENDING", "CONFIGURING", "RUNNING", "COMPLETING":
				return false
			}
			states[task] = state[1] + " " + code[1]
		}
		return true
	})
	for task, st := range states {
		if st != "COMPLETED 0:0" {
			t.Errorf("task %s: %s, want COMPLETED 0:0\n%s", task, st, jobLogs())
		}
	}
}
