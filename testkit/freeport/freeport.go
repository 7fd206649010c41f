// Package freeport picks loopback TCP ports for servers that must be told their
// port before they bind it (a cluster's routes, a server restarted on the same
// address). Such a port is free when picked and taken a moment later; picked
// from below the system's ephemeral range, no outgoing connection of any
// process takes it meanwhile (those get their local ports from that range), so
// only an explicit bind could.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
)

// First is the lowest port picked: above the ports services commonly listen on.
const First = 20000

// Ports returns n distinct loopback TCP ports, free a moment ago, picked at
// random from First up to the ephemeral range.
func Ports(n int) ([]int, error) {
	low, high := First, ephemeralLow()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("freeport: no free loopback port between %d and %d", low, high)
		}
		p := low + rand.IntN(high-low)
		if slices.Contains(ports, p) {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		defer ln.Close() // all held until all are picked
		ports = append(ports, p)
	}
	return ports, nil
}

// Addr returns a loopback address (127.0.0.1:PORT) whose port was free a
// moment ago (see Ports).
func Addr() (string, error) {
	ports, err := Ports(1)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0]), nil
}

// ephemeralLow is the first port of the system's ephemeral range (Linux's
// ip_local_port_range; 32768, its default, where it cannot be read).
func ephemeralLow() int {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > First+1000 {
				return v
			}
		}
	}
	return 32768
}
