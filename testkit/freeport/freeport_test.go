package freeport_test

import (
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/mcp-resume/mcp-resume/testkit/freeport"
)

// Ports gives distinct ports below the ephemeral range, each free to bind.
func TestPorts(t *testing.T) {
	ports, err := freeport.Ports(5)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ports)
	if len(slices.Compact(slices.Clone(ports))) != 5 {
		t.Fatalf("ports %v, want 5 distinct", ports)
	}
	for _, p := range ports {
		if p < freeport.First {
			t.Fatalf("port %d below %d", p, freeport.First)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d not free: %v", p, err)
		}
		ln.Close()
	}
}
