package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"sync"
)

// defaultQueuedBytes is --max-queued-bytes' default: a quarter of the memory
// this process may use (the machine's, or its cgroup's limit when lower), or
// 1 GiB when neither can be read.
func defaultQueuedBytes() int64 {
	mem := machineMemory()
	if lim := cgroupLimit(); lim > 0 && (mem == 0 || lim < mem) {
		mem = lim
	}
	if mem == 0 {
		return 1 << 30
	}
	return mem / 4
}

// softMemoryLimit is the soft memory limit the process gives Go's collector
// (runtime/debug.SetMemoryLimit): nine tenths of its cgroup's memory limit,
// so that the collector works harder as the process nears the limit instead
// of letting the heap grow to twice its live size (GOGC) past it and the
// process be killed; 0 (none set) when GOMEMLIMIT is set (env: the runtime
// took it) or there is no cgroup limit.
func softMemoryLimit(env string, cgroup int64) int64 {
	if env != "" || cgroup <= 0 {
		return 0
	}
	return cgroup / 10 * 9
}

// machineMemory returns MemTotal from /proc/meminfo in bytes, or 0.
func machineMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// cgroupLimit returns the cgroup v2 memory limit of this process in bytes, or
// 0 when there is none or it cannot be read. The file is read once: the
// queued bytes' default and the collector's limit both ask.
var cgroupLimit = sync.OnceValue(func() int64 {
	b, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64) // "max": no limit
	if err != nil {
		return 0
	}
	return n
})
