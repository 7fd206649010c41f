// Package balancer is a TCP load balancer for tests: each new connection goes
// to a backend picked at random among those whose readiness URL answers 200,
// as a Kubernetes Service (kube-proxy in iptables mode) sends new connections
// to ready endpoints only. A connection stays with its backend until either
// end closes it. (Round robin would send the n-th connection of each client
// that opens as many connections as there are backends to the same backend.)
package balancer

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Backend is one instance behind the balancer.
type Backend struct {
	Addr  string // host:port the connections go to
	Ready string // URL that answers 200 while the backend takes new work
}

// Balancer is a listening balancer; Close (run at the test's cleanup) stops it
// and closes every connection it carries.
type Balancer struct {
	ln       net.Listener
	backends []Backend
	probe    *http.Client

	mu    sync.Mutex // guards conns, closed
	conns map[net.Conn]struct{}
	// closed: Close ran; a connection accepted since is closed at once.
	closed bool
	wg     sync.WaitGroup
}

// readyWait bounds how long a new connection waits for a backend to be ready
// before it is closed.
const readyWait = 10 * time.Second

// Start starts a balancer over backends on a loopback port; tb's cleanup closes it.
func Start(tb testing.TB, backends []Backend) *Balancer {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tr := &http.Transport{DisableKeepAlives: true}
	b := &Balancer{ln: ln, backends: backends, probe: &http.Client{Transport: tr, Timeout: time.Second},
		conns: map[net.Conn]struct{}{}}
	b.wg.Go(b.accept)
	tb.Cleanup(b.Close)
	return b
}

// Addr is the balancer's host:port.
func (b *Balancer) Addr() string { return b.ln.Addr().String() }

// Close stops accepting, closes every connection and waits for its goroutines.
func (b *Balancer) Close() {
	b.mu.Lock()
	b.closed = true
	for c := range b.conns {
		_ = c.Close()
	}
	b.mu.Unlock()
	_ = b.ln.Close()
	b.wg.Wait()
}

func (b *Balancer) accept() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		if !b.track(c) {
			continue
		}
		b.wg.Go(func() { b.serve(c) })
	}
}

// track registers c, or closes it once the balancer is closed.
func (b *Balancer) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		_ = c.Close()
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *Balancer) untrack(c net.Conn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
	_ = c.Close()
}

// serve joins c to the next ready backend.
func (b *Balancer) serve(c net.Conn) {
	defer b.untrack(c)
	up := b.dial()
	if up == nil {
		return
	}
	if !b.track(up) {
		return
	}
	defer b.untrack(up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

// dial connects to a ready backend, trying them in a random order until one
// is ready or readyWait has passed; nil then, or once the balancer is closed.
func (b *Balancer) dial() net.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), readyWait)
	defer cancel()
	for ctx.Err() == nil {
		for _, i := range rand.Perm(len(b.backends)) {
			b.mu.Lock()
			closed := b.closed
			b.mu.Unlock()
			if closed {
				return nil
			}
			be := b.backends[i]
			if !b.ready(ctx, be) {
				continue
			}
			var d net.Dialer
			if up, err := d.DialContext(ctx, "tcp", be.Addr); err == nil {
				return up
			}
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	return nil
}

// ready asks be's readiness URL.
func (b *Balancer) ready(ctx context.Context, be Backend) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, be.Ready, nil)
	if err != nil {
		return false
	}
	resp, err := b.probe.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
