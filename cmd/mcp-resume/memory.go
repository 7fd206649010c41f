package main

import (
	"bufio"
	"io/fs"
	"math"
	"os"
	"path"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/resume"
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

// memoryLimit is the collector's soft memory limit (softMemoryLimit's, or
// GOMEMLIMIT's) in bytes, 0 for none.
func memoryLimit() int64 {
	if lim := debug.SetMemoryLimit(-1); lim < math.MaxInt64 {
		return lim
	}
	return 0
}

// withMemoryLimit adds the soft memory limit to a serving log line, when there
// is one.
func withMemoryLimit(ev *zerolog.Event) *zerolog.Event {
	if lim := memoryLimit(); lim > 0 {
		return ev.Int64("memoryLimit", lim)
	}
	return ev
}

// tightShare, shortShare and overShare are the shares of the soft memory
// limit past which the process is tight, short, then overloaded of memory:
// its live heap and its goroutines' stacks past them. Tight, running
// requests keep no superseded progress (resume.Options.MemoryTight), which a
// fast start of many detached requests holds for their first seconds, and
// the workers waiting for their requests' tools leave; short, past what
// leaves the collector room to keep the process under the limit at the pace
// new calls and detached requests' progress make garbage, new calls run
// without a resume policy (resume.Options.MemoryShort); overloaded, new calls
// are refused (mcp.Options.Overloaded): a call that runs plain holds what it
// runs with too, and calls that kept coming got a gateway killed in a 512 MiB
// cgroup.
//
// The process is short, and overloaded, sooner when its live heap alone
// takes more than shortHeapShare, then overHeapShare, of what the stacks
// leave of the limit: the collector's room, and the heap's own waste (spans
// part used, their metadata), grow with the heap, not with the stacks. A
// process whose requests hold goroutines (serve: a tool's, 4 KB of stack)
// thus goes short at shortShare, one whose requests hold none (a gateway's)
// sooner (docs/testing.md, "Detached requests": in a 1 GiB cgroup, serve held
// 100,000 detached countdowns at 0.8 and 95,735 at 0.75, getStatus p99 under
// 1 ms either way; a gateway in a 512 MiB cgroup, overloaded at 0.85 of heap
// and stacks, sat at an RSS of 510 MiB, and was killed once short at 0.8).
const (
	tightShare     = 0.6
	shortShare     = 0.8
	shortHeapShare = 0.7
	overShare      = 0.85
	overHeapShare  = 0.75
)

// memoryRead is how often a memoryWatch reads the runtime's figures; between
// reads it answers with the last.
const memoryRead = 100 * time.Millisecond

// memoryWatch tells the engine how near the process's memory is to its soft
// limit (resume.Options' MemoryTight and MemoryShort), from one reading of
// the live heap, as the last collection found it, and the goroutines' stacks.
type memoryWatch struct {
	limit              uint64
	tight, short, over uint64       // bounds of the heap and stacks, in bytes
	next               atomic.Int64 // unix nanoseconds of the next read
	level              atomic.Int32 // 0: none; 1: tight; 2: short; 3: overloaded
}

// newMemoryWatch returns the watch of a process whose soft memory limit is
// limit; nil without a limit (0).
func newMemoryWatch(limit int64) *memoryWatch {
	if limit <= 0 {
		return nil
	}
	share := func(f float64) uint64 { return uint64(float64(limit) * f) }
	return &memoryWatch{limit: uint64(limit), tight: share(tightShare), short: share(shortShare), over: share(overShare)}
}

// read returns the level, reading the runtime's figures when the last reading
// is older than memoryRead. One caller reads (the one that moves next on),
// the others answer with the last reading: no lock on the way of every call.
func (w *memoryWatch) read() int32 {
	now := time.Now().UnixNano()
	if at := w.next.Load(); now >= at && w.next.CompareAndSwap(at, now+int64(memoryRead)) {
		samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
		metrics.Read(samples)
		w.level.Store(w.levelOf(samples[0].Value.Uint64(), samples[1].Value.Uint64()))
	}
	return w.level.Load()
}

// levelOf returns the level of a process whose live heap and stacks take
// heap and stacks bytes.
func (w *memoryWatch) levelOf(heap, stacks uint64) int32 {
	used, room := heap+stacks, float64(w.limit-min(stacks, w.limit))
	switch {
	case used > w.over || float64(heap) > overHeapShare*room:
		return 3
	case used > w.short || float64(heap) > shortHeapShare*room:
		return 2
	case used > w.tight:
		return 1
	}
	return 0
}

// Tight reports whether the process is tight of memory (short included).
func (w *memoryWatch) Tight() bool { return w.read() >= 1 }

// Short reports whether the process is short of memory (overloaded
// included).
func (w *memoryWatch) Short() bool { return w.read() >= 2 }

// Overloaded reports whether the process is too short of memory to take new
// calls.
func (w *memoryWatch) Overloaded() bool { return w.read() >= 3 }

// engineOptions sets the engine's MemoryTight and MemoryShort from w (none
// without a watch).
func (w *memoryWatch) engineOptions(o *resume.Options) {
	if w != nil {
		o.MemoryTight, o.MemoryShort = w.Tight, w.Short
	}
}

// overloaded is the core's Overloaded (mcp.Options): nil without a watch.
func (w *memoryWatch) overloaded() func() bool {
	if w == nil {
		return nil
	}
	return w.Overloaded
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

// cgroupLimit returns the memory limit of this process's cgroup in bytes, or
// 0 when there is none or it cannot be read. The files are read once: the
// queued bytes' default and the collector's limit both ask.
var cgroupLimit = sync.OnceValue(func() int64 {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	return cgroupLimitIn(os.DirFS("/sys/fs/cgroup"), string(b))
})

// noLimit is where a cgroup v1 limit means none: the kernel's "unlimited"
// is the largest page count in bytes (9223372036854771712 with 4 KiB pages).
const noLimit = 1 << 62

// cgroupLimitIn returns the lowest memory limit on the way from the cgroup
// hierarchy's root (root: /sys/fs/cgroup) to the process's own cgroup, as
// self (/proc/self/cgroup) names it: cgroup v2 (memory.max, in the unified
// hierarchy's "0::" line) or v1 (memory.limit_in_bytes, under the memory
// controller's mount). Each cgroup of the way counts, since a parent's limit
// bounds its children; inside a container whose cgroup namespace is its own,
// the path is "/" and the root's file is the container's. 0 when none is set.
func cgroupLimitIn(root fs.FS, self string) int64 {
	var lowest int64
	take := func(dir, file string) {
		b, err := fs.ReadFile(root, path.Join(dir, file))
		if err != nil {
			return
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64) // v2's "max": none
		if err == nil && n > 0 && n < noLimit && (lowest == 0 || n < lowest) {
			lowest = n
		}
	}
	for line := range strings.Lines(self) {
		hier, ctrls, p, ok := cgroupLine(line)
		if !ok {
			continue
		}
		var dir, file string
		switch {
		case hier == "0" && ctrls == "":
			dir, file = ".", "memory.max"
		case slices.Contains(strings.Split(ctrls, ","), "memory"):
			dir, file = "memory", "memory.limit_in_bytes"
		default:
			continue
		}
		take(dir, file)
		for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
			if part == "" || part == "." || part == ".." {
				break
			}
			dir = path.Join(dir, part)
			take(dir, file)
		}
	}
	return lowest
}

// cgroupLine splits a line of /proc/self/cgroup: "hierarchy:controllers:path".
func cgroupLine(line string) (hier, ctrls, p string, ok bool) {
	hier, rest, ok1 := strings.Cut(strings.TrimRight(line, "\n"), ":")
	ctrls, p, ok2 := strings.Cut(rest, ":")
	return hier, ctrls, p, ok1 && ok2 && strings.HasPrefix(p, "/")
}
