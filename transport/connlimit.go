package transport

import (
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mcp-resume/mcp-resume/spec"
)

// DefaultMaxConnsPerAddress is the default bound of connections from one
// remote address. Loopback is one address: it is high enough for a local
// client with hundreds of calls in flight, each on a connection of its own.
const DefaultMaxConnsPerAddress = 1000

// DefaultMaxConns is the default bound of connections in total: 10,000, or
// three quarters of the process's open-file limit (RLIMIT_NOFILE) when that is
// lower, so that the files the server needs besides (its store, its logs, an
// upstream) are still there when the bound is reached.
func DefaultMaxConns() int {
	if n := fileLimit(); n > 0 {
		return max(min(10000, n*3/4), 1)
	}
	return 10000
}

// ConnLimit bounds the connections open at once over the listeners that share
// it (Listen's Limit): in total, and from one remote address (an IPv4
// address; an IPv6 address by its /64 prefix, which one client holds whole).
// It is safe for concurrent use.
type ConnLimit struct {
	max, perAddress int

	mu     sync.Mutex // guards open and byAddr
	open   int
	byAddr map[netip.Addr]int

	refusedTotal, refusedAddress atomic.Uint64
}

// NewConnLimit returns a ConnLimit of max connections in total and perAddress
// from one address. Zero means the default (DefaultMaxConns,
// DefaultMaxConnsPerAddress), negative no bound.
func NewConnLimit(max, perAddress int) *ConnLimit {
	if max == 0 {
		max = DefaultMaxConns()
	}
	if perAddress == 0 {
		perAddress = DefaultMaxConnsPerAddress
	}
	return &ConnLimit{max: max, perAddress: perAddress, byAddr: map[netip.Addr]int{}}
}

// Conns returns the number of connections open.
func (l *ConnLimit) Conns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Refused returns the number of connections refused so far at the bound in
// total and at the bound per address.
func (l *ConnLimit) Refused() (total, perAddress uint64) {
	return l.refusedTotal.Load(), l.refusedAddress.Load()
}

// admit counts a new connection from key, or returns the answer to refuse it
// with when a bound is reached.
func (l *ConnLimit) admit(key netip.Addr) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perAddress >= 0 && l.byAddr[key] >= l.perAddress {
		l.refusedAddress.Add(1)
		return refusedPerAddress
	}
	if l.max >= 0 && l.open >= l.max {
		l.refusedTotal.Add(1)
		return refusedTotal
	}
	l.open++
	l.byAddr[key]++
	return nil
}

// release uncounts a connection from key that closed.
func (l *ConnLimit) release(key netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byAddr[key]--; l.byAddr[key] <= 0 {
		delete(l.byAddr, key)
	}
}

// addrKey is the address a connection from a is counted under: the IP, an
// IPv4-mapped IPv6 address as IPv4, an IPv6 address as its /64 prefix.
func addrKey(a net.Addr) netip.Addr {
	var ip netip.Addr
	switch a := a.(type) {
	case *net.TCPAddr:
		ip = a.AddrPort().Addr()
	default:
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			ip = ap.Addr()
		}
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return ip
}

var (
	refusedTotal      = refusal("too many connections to this server; try again later")
	refusedPerAddress = refusal("too many connections from this address; close some, or try again later")
)

// refusal is the HTTP response a refused connection gets: 503, a JSON-RPC
// error without an id (reason too_many_connections), Connection: close.
func refusal(msg string) []byte {
	body := spec.EncodeError(nil, spec.NewError(spec.CodeInternalError, spec.ReasonTooManyConnections, msg))
	b := []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nRetry-After: 1\r\nContent-Length: ")
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	return append(b, body...)
}
