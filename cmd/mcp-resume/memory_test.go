package main

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"testing/fstest"

	"github.com/mcp-resume/mcp-resume/resume"
)

// The process gives Go's collector nine tenths of its cgroup's memory limit,
// unless GOMEMLIMIT says otherwise or there is no limit.
func TestSoftMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		env    string
		cgroup int64
		want   int64
	}{
		{"", 1 << 30, 966367638},
		{"", 0, 0},
		{"800MiB", 1 << 30, 0},
		{"off", 1 << 30, 0},
	} {
		if got := softMemoryLimit(c.env, c.cgroup); got != c.want {
			t.Errorf("softMemoryLimit(%q, %d) = %d, want %d", c.env, c.cgroup, got, c.want)
		}
	}
}

// The process's memory limit is the lowest on the way to its cgroup, in the
// unified hierarchy (v2) or under the memory controller (v1), from the root
// (a container's own cgroup namespace) down.
func TestCgroupLimit(t *testing.T) {
	const gib = 1 << 30
	files := fstest.MapFS{
		// v2: a container's own namespace, then a service in a slice.
		"memory.max":                            {Data: []byte("1073741824\n")},
		"system.slice/memory.max":               {Data: []byte("max\n")},
		"system.slice/mr.service/memory.max":    {Data: []byte("536870912\n")},
		"user.slice/memory.max":                 {Data: []byte("2147483648\n")},
		"user.slice/session-1.scope/memory.max": {Data: []byte("max\n")},
		// v1: unlimited at the root and in one child, 1 GiB in another.
		"memory/memory.limit_in_bytes":         {Data: []byte("9223372036854771712\n")},
		"memory/pod/memory.limit_in_bytes":     {Data: []byte("9223372036854771712\n")},
		"memory/pod/box/memory.limit_in_bytes": {Data: []byte("1073741824\n")},
		"memory/other/memory.limit_in_bytes":   {Data: []byte("garbage\n")},
	}
	noRoot := fstest.MapFS{}
	for name, v := range files {
		if name != "memory.max" {
			noRoot[name] = v
		}
	}
	for _, c := range []struct {
		name string
		fs   fstest.MapFS
		self string
		want int64
	}{
		{"v2 container", files, "0::/\n", gib},
		{"v2 service: its own limit, under the root's", noRoot, "0::/system.slice/mr.service\n", gib / 2},
		{"v2 session: its slice's", noRoot, "0::/user.slice/session-1.scope\n", 2 * gib},
		{"v2 root lower than the service's", files, "0::/user.slice/session-1.scope\n", gib},
		{"v1", files, "12:pids:/pod/box\n4:memory:/pod/box\n1:name=systemd:/\n", gib},
		{"v1 with other controllers", files, "4:cpu,memory:/pod/box\n", gib},
		{"v1 unlimited", files, "4:memory:/pod\n", 0},
		{"v1 unreadable", files, "4:memory:/other\n", 0},
		{"hybrid: v1 memory, v2 without", noRoot, "0::/\n4:memory:/pod/box\n", gib},
		{"a path that leaves the root", files, "4:memory:/../pod/box\n", 0},
		{"none", fstest.MapFS{}, "0::/\n", 0},
		{"unreadable /proc/self/cgroup", files, "", 0},
	} {
		if got := cgroupLimitIn(c.fs, c.self); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// The watch reads the process's live heap and stacks, and tells the engine
// and the core the level they make (TestMemoryLevels): tight past tightShare
// of its soft limit; without a limit it never is, and the engine and the
// core are given none of the checks.
func TestMemoryWatch(t *testing.T) {
	if newMemoryWatch(0) != nil {
		t.Error("newMemoryWatch(0) is not nil")
	}
	var none resume.Options
	(*memoryWatch)(nil).engineOptions(&none)
	if none.MemoryTight != nil || none.MemoryShort != nil || (*memoryWatch)(nil).overloaded() != nil {
		t.Error("the engine or the core is told of memory without a limit")
	}
	used := func() uint64 { // what the watch reads
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64() + s[1].Value.Uint64()
	}
	runtime.GC()
	u := float64(used())
	between := func(lo, hi float64) int64 { return int64(u / (lo + hi) * 2) } // used at the middle of the two shares
	for _, c := range []struct {
		name               string
		limit              int64
		tight, short, over bool
	}{
		{"a limit of 1 byte", 1, true, true, true},                                        // its goroutines' stacks alone are more
		{"used past the tight share alone", between(tightShare, 0.7), true, false, false}, // the heap within 0.7 of what the stacks leave too
		{"a limit of 1 PiB", 1 << 50, false, false, false},
	} {
		w := newMemoryWatch(c.limit)
		var o resume.Options
		w.engineOptions(&o)
		tight, short, over := o.MemoryTight(), o.MemoryShort(), w.overloaded()()
		if tight != c.tight || short != c.short || over != c.over {
			t.Errorf("%s (%.0f bytes used): tight %t, short %t, overloaded %t; want %t, %t, %t", c.name, u, tight, short, over, c.tight, c.short, c.over)
		}
	}
}

// A process is short of memory past shortShare of its limit for its heap
// and stacks together, or, sooner, past shortHeapShare of what its stacks
// leave for its heap alone, and overloaded likewise (overShare,
// overHeapShare): one whose requests hold no goroutine (a gateway's) goes
// short at seven tenths, one whose stacks take half (serve's detached
// countdowns) at four fifths.
func TestMemoryLevels(t *testing.T) {
	const mb = 1 << 20
	w := newMemoryWatch(1000 * mb)
	for _, c := range []struct {
		heap, stacks uint64 // MB
		want         int32
	}{
		{590, 0, 0},
		{610, 0, 1},
		{690, 0, 1},
		{710, 0, 2}, // the heap past 0.7 of the limit
		{740, 0, 2},
		{760, 0, 3},   // past 0.75
		{330, 420, 1}, // 750: past 0.7 of the limit, but neither bound
		{360, 420, 1},
		{390, 420, 2}, // 810: past 0.8
		{600, 100, 1},
		{640, 100, 2}, // 740, but the heap past 0.7 of the 900 the stacks leave
		{680, 100, 3}, // 780, but the heap past 0.75 of it
		{100, 760, 3}, // 860: past 0.85
	} {
		if got := w.levelOf(c.heap*mb, c.stacks*mb); got != c.want {
			t.Errorf("heap %d MB, stacks %d MB: level %d, want %d", c.heap, c.stacks, got, c.want)
		}
	}
}
