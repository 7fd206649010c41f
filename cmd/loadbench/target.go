package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcp-resume/mcp-resume/testkit/freeport"
)

// target is one server under measurement: a process of its own.
type target struct {
	name    string
	url     string
	cmd     *exec.Cmd
	client  *http.Client
	results []result
	// keyed: its echo calls carry a call key of their own (io.mcp-resume/key),
	// as every call of our own clients, connect and the gateway does.
	keyed bool
}

// buildBinary builds this tree's mcp-resume into dir.
func buildBinary(dir string) (string, error) {
	bin := filepath.Join(dir, "mcp-resume")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/mcp-resume/mcp-resume/cmd/mcp-resume")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build: %w", err)
	}
	return bin, nil
}

// startTarget starts the server that spec (NAME=KIND[:ARGS]) names and waits
// until it accepts connections. Leading KEY=VALUE words of ARGS are its
// environment (added to this process's); {otlp} is sink's URL (sink is
// started on first use).
func startTarget(spec, work string, logs bool, sink **otlpSink) (*target, error) {
	name, rest, ok := strings.Cut(spec, "=")
	if !ok || name == "" {
		return nil, fmt.Errorf("target %q: want NAME=KIND[:ARGS]", spec)
	}
	kind, args, _ := strings.Cut(rest, ":")
	kind, keyed := strings.CutSuffix(kind, "+keyed")
	if kind == "url" { // a server started elsewhere: no memory or CPU figures
		return &target{name: name, url: args, client: newClient(), keyed: keyed}, nil
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(work, name)
	if err != nil {
		return nil, err
	}
	if strings.Contains(args, "{otlp}") {
		if *sink == nil {
			if *sink, err = startOTLPSink(); err != nil {
				return nil, err
			}
		}
		args = strings.ReplaceAll(args, "{otlp}", (*sink).url)
	}
	fields := strings.Fields(strings.ReplaceAll(args, "{dir}", dir))
	var env []string
	for len(fields) > 0 && envWord.MatchString(fields[0]) {
		env, fields = append(env, fields[0]), fields[1:]
	}
	var argv []string
	path := "/mcp"
	switch kind {
	case "floor", "mcpgo":
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		argv = []string{self, "-serve-" + kind, addr}
	case "serve":
		if len(fields) == 0 {
			return nil, fmt.Errorf("target %q: serve needs the binary", spec)
		}
		argv = append([]string{fields[0], "serve", "--http", addr}, fields[1:]...)
	case "gateway":
		if len(fields) == 0 {
			return nil, fmt.Errorf("target %q: gateway needs the binary", spec)
		}
		own, upstream := fields[1:], []string(nil)
		if i := slices.Index(own, "--"); i >= 0 {
			own, upstream = own[:i], own[i+1:]
		}
		argv = append([]string{fields[0], "gateway", "--http", addr}, own...)
		argv = append(append(argv, "--", fields[0], "serve", "--stdio"), upstream...)
	default:
		return nil, fmt.Errorf("target %q: unknown kind %q", spec, kind)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // stop takes its children too
	var stderr bytes.Buffer
	cmd.Stdout = io.Discard
	cmd.Stderr = &stderr
	if logs {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("target %s: %w", name, err)
	}
	t := &target{name: name, url: "http://" + addr + path, cmd: cmd, client: newClient(), keyed: keyed}
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return t, nil
		}
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			t.stop()
			return nil, fmt.Errorf("target %s: not listening on %s after 60 s: %s", name, addr, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// envWord is a KEY=VALUE word of a target's ARGS: an environment variable.
var envWord = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
}

// stop kills the target's process group.
func (t *target) stop() {
	if t.cmd != nil && t.cmd.Process != nil && t.cmd.ProcessState == nil {
		_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
		_ = t.cmd.Wait()
	}
}

// terminate stops the target's process group as a supervisor would
// (SIGTERM), and kills it after 10 s.
func (t *target) terminate() {
	if t.cmd == nil || t.cmd.Process == nil || t.cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		_ = t.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// rss is the target process's resident memory in bytes (0 when unknown).
func (t *target) rss() int64 {
	if t.cmd == nil {
		return 0
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", t.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpu is the CPU time (user and system) the target's processes have used so
// far: its process group, children included (the gateway's upstream).
func (t *target) cpu() time.Duration {
	if t.cmd == nil {
		return 0
	}
	entries, _ := os.ReadDir("/proc")
	var ticks int64
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
		_, rest, ok := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if !ok || len(f) < 13 || f[2] != strconv.Itoa(t.cmd.Process.Pid) {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on Linux.
const clockTicks = 100

// freeAddr is a loopback address with a port free now (see package freeport).
func freeAddr() (string, error) { return freeport.Addr() }
