package jsstore_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/resume/jsstore/embedded"
)

// The test binary doubles as a NATS server in a process of its own, so that its
// memory is measured apart from ours, and so that it can be killed (SIGKILL):
// with natsProcEnv set to a directory, TestMain runs natsProc instead of the
// tests. natsProcSyncEnv set to 1 syncs every write (embedded.Options.SyncAlways).
const (
	natsProcEnv     = "MR_NATS_PROCESS_DIR"
	natsProcSyncEnv = "MR_NATS_PROCESS_SYNC"
)

// natsProc runs an embedded server on dir, listening on a free loopback port,
// and prints its client URL on a line; then it answers each line read from stdin
// with a line of JSON, its memory, and stops when stdin closes. It returns the
// exit code.
func natsProc(dir string) int {
	srv, err := embedded.Start(&embedded.Options{Dir: dir, Listen: "127.0.0.1:0", SyncAlways: os.Getenv(natsProcSyncEnv) == "1"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Shutdown()
	fmt.Println(srv.ClientURL())
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		if err := out.Encode(readMem()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// mem is a process's memory.
type mem struct {
	// HeapInuse and Sys are the Go runtime's, after a collection.
	HeapInuse, Sys uint64
	// RSS and PeakRSS are the kernel's resident set size, now and at its
	// highest (VmRSS and VmHWM); 0 where /proc is not.
	RSS, PeakRSS uint64
}

func (m mem) String() string {
	return fmt.Sprintf("heap in use %d MiB, Go runtime %d MiB, RSS %d MiB (peak %d MiB)", m.HeapInuse>>20, m.Sys>>20, m.RSS>>20, m.PeakRSS>>20)
}

// readMem returns this process's memory.
func readMem() mem {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := mem{HeapInuse: ms.HeapInuse, Sys: ms.Sys}
	status, _ := os.ReadFile("/proc/self/status")
	for line := range bytes.Lines(status) {
		name, val, _ := strings.Cut(string(line), ":")
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		switch {
		case err != nil:
		case name == "VmRSS":
			m.RSS = kb << 10
		case name == "VmHWM":
			m.PeakRSS = kb << 10
		}
	}
	return m
}

// natsProcess is a NATS server in a child process (see natsProc).
type natsProcess struct {
	URL    string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	killed bool // by kill: its exit is no error
}

// startNATSProcess starts a NATS server in a child process, with a fresh
// directory; it stops when the test ends.
func startNATSProcess(t testing.TB) *natsProcess {
	t.Helper()
	return startNATSProcessOn(t, t.TempDir(), false)
}

// startNATSProcessOn starts a NATS server in a child process on dir, syncing
// every write when syncAlways is set; it stops when the test ends, unless kill
// ended it before.
func startNATSProcessOn(t testing.TB, dir string, syncAlways bool) *natsProcess {
	t.Helper()
	sync := "0"
	if syncAlways {
		sync = "1"
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), natsProcEnv+"="+dir, natsProcSyncEnv+"="+sync)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &natsProcess{cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		if p.killed {
			return
		}
		in.Close() // the server stops, the process exits
		if err := cmd.Wait(); err != nil {
			t.Errorf("the NATS process: %v", err)
		}
	})
	url, err := p.out.ReadString('\n')
	if err != nil {
		t.Fatalf("the NATS process did not start: %v", err)
	}
	p.URL = strings.TrimSpace(url)
	return p
}

// kill ends the child process with SIGKILL, as a crash would, and waits for it:
// the server neither flushes nor writes its state, and its lock on the
// directory is gone once kill returns.
func (p *natsProcess) kill(t testing.TB) {
	t.Helper()
	p.killed = true
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatalf("killing the NATS process: %v", err)
	}
	_ = p.cmd.Wait() // "signal: killed"
	p.in.Close()
}

// mem returns the child process's memory.
func (p *natsProcess) mem() (mem, error) {
	var m mem
	if _, err := io.WriteString(p.in, "mem\n"); err != nil {
		return m, fmt.Errorf("asking the NATS process for its memory: %w", err)
	}
	line, err := p.out.ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &m)
	}
	if err != nil {
		return m, fmt.Errorf("the NATS process's memory: %w", err)
	}
	return m, nil
}
