package transport

import (
	"net"
	"runtime"
	"testing"
	"time"
)

// Connections accepted by Listen carry the user timeout.
func TestListenUserTimeout(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_USER_TIMEOUT is Linux's")
	}
	ln, err := Listen(t.Context(), "127.0.0.1:0", 45*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			var b [1]byte
			_, _ = c.Read(b[:])
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := userTimeout(c.(*net.TCPConn)); got != 45*time.Second {
		t.Fatalf("TCP_USER_TIMEOUT %v, want 45s", got)
	}
}
