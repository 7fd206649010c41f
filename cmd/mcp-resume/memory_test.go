package main

import "testing"

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
