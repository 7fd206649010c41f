//go:build race

package mcp_test

// race: the race detector is on (stacks and heap are larger under it).
const race = true
