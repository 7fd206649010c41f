//go:build !race

package mcp_test

const race = false
